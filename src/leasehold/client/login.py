"""`leasehold login`'s session: the deployed stack's Cognito tokens, kept in a file only its
owner can read, refreshed when the ID token has expired (docs/decisions.md CL5).

The file is `$LEASEHOLD_SESSION`, else `$XDG_CONFIG_HOME/leasehold/session.json`, else
`~/.config/leasehold/session.json`: mode 0600 (its directory created 0700 when it did not
exist), written whole (a temporary file renamed over it), and refused when group or others
may read it, as ssh refuses a key others can read. No token is ever printed or logged; the
errors name the file, never its contents.

Cognito's `initiate_auth` is an unsigned call: signing in needs the app client's id and the
region, no AWS credentials. `USER_PASSWORD_AUTH` (the template's app client allows it, and
`ALLOW_REFRESH_TOKEN_AUTH`) signs in; `REFRESH_TOKEN_AUTH` renews the ID and access tokens
until the refresh token itself expires (the template: 30 days), after which the session says
to run `leasehold login` again.

A pool with MFA (the template's `OperatorMfa`, ON in the production profile) asks for the
code of the user's authenticator app (`SOFTWARE_TOKEN_MFA`): `mfa_code()` gives it. A user with
no authenticator yet, in a pool where MFA is ON, sets one up at sign-in (`MFA_SETUP`):
`mfa_setup(secret)` shows the secret to add to the app and returns the app's first code."""

from __future__ import annotations

import json
import os
import stat
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from leasehold.client.errors import InvalidInput, Unauthenticated, Unavailable

SESSION_ENV = "LEASEHOLD_SESSION"
REFRESH_MARGIN_S = 60.0
"""A token this close to its expiry is refreshed first: it must outlive the request."""
SESSION_FIELDS = (
    "api_url",
    "region",
    "client_id",
    "username",
    "id_token",
    "access_token",
    "refresh_token",
    "expires_at",
)


class LoginExpired(Unauthenticated):
    """There is no usable login session: none yet, unreadable, or its refresh token was refused
    (expired or revoked). The message says to run `leasehold login` (again). It is an
    `ApiError.Unauthenticated`, so one `except` covers both."""

    def __init__(self, message: str) -> None:
        super().__init__(401, "login_expired", message)


def session_path(environ: Mapping[str, str] | None = None) -> Path:
    """Where the session is kept (module docstring)."""
    env = os.environ if environ is None else environ
    if env.get(SESSION_ENV):
        return Path(env[SESSION_ENV])
    config = Path(env["XDG_CONFIG_HOME"]) if env.get("XDG_CONFIG_HOME") else None
    return (config or Path.home() / ".config") / "leasehold" / "session.json"


def cognito_client(region: str) -> Any:
    """The `cognito-idp` client of `region` (boto3 is imported only here, when needed)."""
    import boto3

    return boto3.client("cognito-idp", region_name=region)


class NewPasswordRequired(LoginExpired):
    """The user pool wants a new password first (an administrator's temporary password)."""


class MfaRequired(LoginExpired):
    """The user pool wants a code from the user's authenticator app, and none was given, or
    wants an authenticator set up first where that cannot be done. `code` says which
    (`mfa_code_required`, `mfa_setup_required`)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


MFA_DEVICE_NAME = "leasehold login"
"""The name Cognito keeps for an authenticator set up by `leasehold login`."""
MAX_CHALLENGES = 4
"""New password, MFA setup, MFA code: a sign-in never needs more answers than this."""


@dataclass
class LoginSession:
    """One signed-in user of one deployed stack: its API URL, the pool's app client and
    region, the tokens and when the ID token expires (epoch seconds)."""

    api_url: str
    region: str
    client_id: str
    username: str
    id_token: str = field(repr=False)
    access_token: str = field(repr=False)
    refresh_token: str = field(repr=False)
    expires_at: float
    path: Path = field(default_factory=session_path, compare=False)
    cognito: Any = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ signing in

    @classmethod
    def sign_in(
        cls,
        *,
        api_url: str,
        region: str,
        client_id: str,
        username: str,
        password: str,
        path: Path | None = None,
        new_password: Callable[[], str] | None = None,
        mfa_code: Callable[[], str] | None = None,
        mfa_setup: Callable[[str], str] | None = None,
        cognito: Any = None,
    ) -> LoginSession:
        """Sign in with `USER_PASSWORD_AUTH` and keep the session at `path` (default:
        `session_path()`). A first sign-in with an administrator's temporary password asks
        `new_password()` for the user's own (`NewPasswordRequired` without one). A pool with
        MFA asks `mfa_code()` for the authenticator's code, and a user who must set one up
        `mfa_setup(secret)` (`MfaRequired` without them). A wrong username, password or code
        is `ApiError.Unauthenticated`."""
        idp = cognito or cognito_client(region)
        answer = _cognito(
            lambda: idp.initiate_auth(
                ClientId=client_id,
                AuthFlow="USER_PASSWORD_AUTH",
                AuthParameters={"USERNAME": username, "PASSWORD": password},
            ),
            what="sign in",
        )
        for _ in range(MAX_CHALLENGES):
            if "AuthenticationResult" in answer:
                break
            answered = _answer_challenge(
                idp,
                client_id,
                username,
                answer,
                new_password=new_password,
                mfa_code=mfa_code,
                mfa_setup=mfa_setup,
            )
            if answered is answer:
                break  # a challenge it cannot answer: said below
            answer = answered
        if "AuthenticationResult" not in answer:
            challenge = answer.get("ChallengeName", "an unknown step")
            raise Unauthenticated(
                401,
                "challenge_unsupported",
                f"the user pool asks for {challenge}, which `leasehold login` cannot answer",
            )
        result = answer["AuthenticationResult"]
        session = cls(
            api_url=api_url.rstrip("/"),
            region=region,
            client_id=client_id,
            username=username,
            id_token=result["IdToken"],
            access_token=result["AccessToken"],
            refresh_token=result["RefreshToken"],
            expires_at=time.time() + float(result.get("ExpiresIn", 3600)),
            path=path or session_path(),
            cognito=idp,
        )
        session.save()
        return session

    @classmethod
    def load(cls, path: Path | None = None, *, cognito: Any = None) -> LoginSession:
        """The session kept at `path` (default: `session_path()`); `LoginExpired` when there
        is none, it cannot be read, or others may read it."""
        where = path or session_path()
        try:
            mode = where.stat().st_mode
        except FileNotFoundError:
            raise LoginExpired(
                f"not logged in (no session at {where}): run `leasehold login`"
            ) from None
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise LoginExpired(
                f"{where} may be read by others (mode {stat.filemode(mode)}): refusing it; "
                f"`chmod 600 {where}`, or remove it and run `leasehold login` again"
            )
        try:
            kept = json.loads(where.read_text(encoding="utf-8"))
            values = {name: kept[name] for name in SESSION_FIELDS}
            values["expires_at"] = float(values["expires_at"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise LoginExpired(
                f"the session at {where} cannot be read ({type(exc).__name__}): run "
                "`leasehold login` again"
            ) from None
        return cls(**values, path=where, cognito=cognito)

    # ------------------------------------------------------------------ using it

    def fresh_id_token(self) -> str:
        """The ID token, refreshed first when it expires within a minute (the API's JWT
        authorizer reads the tenant and groups from the ID token, not the access token).
        `LoginExpired` when the refresh token is refused."""
        with self._lock:
            if time.time() >= self.expires_at - REFRESH_MARGIN_S:
                self.refresh()
            return self.id_token

    def refresh(self) -> None:
        """New ID and access tokens from the refresh token (`REFRESH_TOKEN_AUTH`), saved."""
        idp = self.cognito or cognito_client(self.region)
        self.cognito = idp
        try:
            answer = _cognito(
                lambda: idp.initiate_auth(
                    ClientId=self.client_id,
                    AuthFlow="REFRESH_TOKEN_AUTH",
                    AuthParameters={"REFRESH_TOKEN": self.refresh_token},
                ),
                what="refresh the session",
            )
        except Unauthenticated as exc:
            raise LoginExpired(
                f"the login session of {self.username} has expired: run `leasehold login` again"
            ) from exc
        result = answer["AuthenticationResult"]
        self.id_token = result["IdToken"]
        self.access_token = result["AccessToken"]
        self.refresh_token = result.get("RefreshToken") or self.refresh_token
        self.expires_at = time.time() + float(result.get("ExpiresIn", 3600))
        self.save()

    def save(self) -> None:
        """Write the session whole: a 0600 file, renamed into place, in a directory created
        0700 when it did not exist."""
        directory = self.path.parent
        if not directory.exists():  # ours: 0700 whatever the umask (one we did not make is
            directory.mkdir(mode=0o700, parents=True)  # left alone: the file is 0600 anyway)
            directory.chmod(0o700)
        kept = {name: getattr(self, name) for name in SESSION_FIELDS}
        # A new file of a name nobody could guess (O_EXCL, 0600): in a directory others may
        # write, a fixed name could be a link they planted, and the tokens would go through it.
        descriptor, name = tempfile.mkstemp(dir=directory, prefix=f".{self.path.name}.")
        temporary = Path(name)
        try:
            with os.fdopen(descriptor, "w", encoding="utf-8") as out:
                json.dump(kept, out)
                out.flush()
                os.fsync(out.fileno())
            os.replace(temporary, self.path)
        except BaseException:
            temporary.unlink(missing_ok=True)
            raise


def _answer_challenge(
    idp: Any,
    client_id: str,
    username: str,
    answer: dict[str, Any],
    *,
    new_password: Callable[[], str] | None,
    mfa_code: Callable[[], str] | None,
    mfa_setup: Callable[[str], str] | None,
) -> dict[str, Any]:
    """Cognito's next answer after this challenge's response; the challenges it cannot answer
    come back unchanged (the caller says which one)."""
    challenge = answer.get("ChallengeName")

    def respond(responses: dict[str, str], session: str, what: str) -> dict[str, Any]:
        return _cognito(
            lambda: idp.respond_to_auth_challenge(
                ClientId=client_id,
                ChallengeName=challenge,
                Session=session,
                ChallengeResponses={"USERNAME": username, **responses},
            ),
            what=what,
        )

    if challenge == "NEW_PASSWORD_REQUIRED":
        if new_password is None:
            raise NewPasswordRequired(
                "the user pool wants a new password for this user first: run `leasehold "
                "login` in a terminal to choose one"
            )
        chosen = new_password()
        return respond({"NEW_PASSWORD": chosen}, answer["Session"], "set the new password")
    if challenge == "SOFTWARE_TOKEN_MFA":
        if mfa_code is None:
            raise MfaRequired(
                "mfa_code_required",
                "the user pool asks for the code of this user's authenticator app: pass "
                "--mfa-code CODE (or set LEASEHOLD_MFA_CODE), or run `leasehold login` in a "
                "terminal to be asked for it",
            )
        code = mfa_code().strip()
        return respond({"SOFTWARE_TOKEN_MFA_CODE": code}, answer["Session"], "check the code")
    if challenge == "MFA_SETUP":
        if mfa_setup is None:
            raise MfaRequired(
                "mfa_setup_required",
                "the user pool requires MFA and this user has no authenticator app set up "
                "yet: run `leasehold login` in a terminal to set one up",
            )
        associated = _cognito(
            lambda: idp.associate_software_token(Session=answer["Session"]),
            what="set up the authenticator",
        )
        code = mfa_setup(associated["SecretCode"]).strip()
        verified = _cognito(
            lambda: idp.verify_software_token(
                Session=associated.get("Session", answer["Session"]),
                UserCode=code,
                FriendlyDeviceName=MFA_DEVICE_NAME,
            ),
            what="check the authenticator's code",
        )
        if verified.get("Status") != "SUCCESS":
            raise Unauthenticated(
                401, "code_mismatch_exception", "the authenticator's code was not accepted"
            )
        session = verified.get("Session") or associated.get("Session") or answer["Session"]
        return respond({}, session, "finish setting up the authenticator")
    return answer


def _cognito(call: Callable[[], dict[str, Any]], *, what: str) -> dict[str, Any]:
    """One Cognito call. A refusal of the user (a wrong password, a revoked or expired refresh
    token) is `Unauthenticated`; a wrong app client id or region `InvalidInput`; anything else
    (throttling, no network) `Unavailable`. The message names the call, never a token."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        return call()
    except ClientError as exc:
        error = exc.response.get("Error", {})
        code, message = str(error.get("Code", "")), str(error.get("Message", ""))
        text = f"cannot {what}: {code}: {message}"
        if code in REFUSALS:
            raise Unauthenticated(401, _snake(code), text) from None
        if code in {"ResourceNotFoundException", "InvalidParameterException"}:
            hint = f"{text} (check the app client id and the region)"
            raise InvalidInput(400, _snake(code), hint) from None
        raise Unavailable(503, _snake(code) or "cognito_error", text) from None
    except BotoCoreError as exc:
        raise Unavailable(503, "cognito_unreachable", f"cannot {what}: {exc}") from None


REFUSALS = frozenset(
    {
        "NotAuthorizedException",
        "UserNotFoundException",
        "UserNotConfirmedException",
        "PasswordResetRequiredException",
        "CodeMismatchException",
        "ExpiredCodeException",
        "EnableSoftwareTokenMFAException",
    }
)


def _snake(code: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in code).lstrip("_")
