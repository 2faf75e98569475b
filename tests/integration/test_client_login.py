"""`leasehold login` and the session it keeps, on moto's in-process Cognito: a user pool and app
client made as template.yaml makes them; the session file only its owner can read; the ID
token refreshed when it has expired; an expired session that says to log in again; and never a
token on the terminal."""

from __future__ import annotations

import io
import json
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from moto import mock_aws

from leasehold.client import ApiError, Client
from leasehold.client.login import LoginExpired, LoginSession, session_path
from leasehold_dev.cli import main
from tests.support.resources import TEMPLATE
from tests.support.scripted_api import ScriptedApi

pytestmark = pytest.mark.integration

REGION = "us-east-1"
PASSWORD = "Correct-Horse-9!"
URL = "https://abc123.execute-api.us-east-1.amazonaws.com"


class _Loader(yaml.SafeLoader):
    """template.yaml with its short-form intrinsics (`!Ref`, `!Sub`) read as plain values."""


_Loader.add_multi_constructor("!", lambda loader, suffix, node: None)


def _template_client() -> dict[str, Any]:
    resources = yaml.load(TEMPLATE.read_text(), Loader=_Loader)["Resources"]  # noqa: S506
    return dict(resources["UserPoolClient"]["Properties"])


@pytest.fixture
def pool(aws_env: None) -> Iterator[dict[str, Any]]:
    """A user pool whose app client has the template's auth flows, and alice in it."""
    with mock_aws():
        import boto3

        idp = boto3.client("cognito-idp", region_name=REGION)
        pool_id = idp.create_user_pool(
            PoolName="users",
            UsernameAttributes=["email"],
            Schema=[{"Name": "tenant", "AttributeDataType": "String", "Mutable": False}],
        )["UserPool"]["Id"]
        flows = _template_client()["ExplicitAuthFlows"]
        client_id = idp.create_user_pool_client(
            UserPoolId=pool_id, ClientName="app", ExplicitAuthFlows=flows
        )["UserPoolClient"]["ClientId"]
        idp.admin_create_user(
            UserPoolId=pool_id,
            Username="alice@example.com",
            UserAttributes=[
                {"Name": "email", "Value": "alice@example.com"},
                {"Name": "custom:tenant", "Value": "study-group"},
            ],
            MessageAction="SUPPRESS",
        )
        idp.admin_set_user_password(
            UserPoolId=pool_id, Username="alice@example.com", Password=PASSWORD, Permanent=True
        )
        yield {"idp": idp, "pool_id": pool_id, "client_id": client_id}


@pytest.fixture
def session_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "config" / "leasehold" / "session.json"
    monkeypatch.setenv("LEASEHOLD_SESSION", str(path))
    return path


def _sign_in(pool: dict[str, Any], path: Path, password: str = PASSWORD) -> LoginSession:
    return LoginSession.sign_in(
        api_url=URL,
        region=REGION,
        client_id=pool["client_id"],
        username="alice@example.com",
        password=password,
        path=path,
    )


def test_the_template_app_client_allows_the_flows_login_uses() -> None:
    flows = set(_template_client()["ExplicitAuthFlows"])
    assert {"ALLOW_USER_PASSWORD_AUTH", "ALLOW_REFRESH_TOKEN_AUTH"} <= flows
    assert _template_client()["GenerateSecret"] is False  # a CLI cannot keep a client secret


def test_signing_in_keeps_the_session_where_only_its_owner_can_read_it(
    pool: dict[str, Any], session_file: Path
) -> None:
    session = _sign_in(pool, session_file)
    assert stat.S_IMODE(session_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(session_file.parent.stat().st_mode) == 0o700
    kept = json.loads(session_file.read_text())
    assert kept["api_url"] == URL and kept["username"] == "alice@example.com"
    assert kept["id_token"] == session.id_token and kept["refresh_token"]
    assert kept["expires_at"] > time.time() + 60
    assert session_path() == session_file  # $LEASEHOLD_SESSION names it
    assert LoginSession.load() == session
    assert session.id_token not in repr(session)  # a session printed by mistake shows no token


def test_a_session_file_others_may_read_is_refused(
    pool: dict[str, Any], session_file: Path
) -> None:
    _sign_in(pool, session_file)
    session_file.chmod(0o644)
    with pytest.raises(LoginExpired, match="may be read by others"):
        LoginSession.load()


def test_an_expired_id_token_is_refreshed_and_the_new_one_kept(
    pool: dict[str, Any], session_file: Path
) -> None:
    # Given a session whose ID token has expired
    first = _sign_in(pool, session_file)
    kept = json.loads(session_file.read_text())
    kept["expires_at"] = time.time() - 1
    session_file.write_text(json.dumps(kept))
    session = LoginSession.load()
    # When a token is asked for, Then it is a new one, saved with its new expiry
    token = session.fresh_id_token()
    assert token != first.id_token
    again = json.loads(session_file.read_text())
    assert again["id_token"] == token and again["expires_at"] > time.time() + 60
    assert stat.S_IMODE(session_file.stat().st_mode) == 0o600
    # And a token that is still fresh is not refreshed
    assert LoginSession.load().fresh_id_token() == token


def test_a_session_whose_refresh_token_is_refused_says_to_log_in_again(
    pool: dict[str, Any], session_file: Path
) -> None:
    _sign_in(pool, session_file)
    kept = json.loads(session_file.read_text())
    kept.update(expires_at=time.time() - 1, refresh_token="revoked-or-expired")
    session_file.write_text(json.dumps(kept))
    with pytest.raises(LoginExpired, match=r"has expired: run `leasehold login` again") as raised:
        LoginSession.load().fresh_id_token()
    assert isinstance(raised.value, ApiError.Unauthenticated) and raised.value.status == 401


def test_no_session_and_a_wrong_password_say_what_to_do(
    pool: dict[str, Any], session_file: Path
) -> None:
    with pytest.raises(LoginExpired, match="not logged in .* run `leasehold login`"):
        Client.from_login()
    with pytest.raises(ApiError.Unauthenticated) as raised:
        _sign_in(pool, session_file, password="Wrong-Horse-9!")
    assert raised.value.code == "not_authorized_exception"
    assert "Wrong-Horse" not in str(raised.value)
    assert not session_file.exists()


def test_a_temporary_password_is_replaced_at_first_sign_in(
    pool: dict[str, Any], session_file: Path
) -> None:
    pool["idp"].admin_create_user(
        UserPoolId=pool["pool_id"],
        Username="bob@example.com",
        TemporaryPassword="Temporary-Pass-1!",
        MessageAction="SUPPRESS",
    )

    def sign_in(new_password: Any) -> LoginSession:
        return LoginSession.sign_in(
            api_url=URL,
            region=REGION,
            client_id=pool["client_id"],
            username="bob@example.com",
            password="Temporary-Pass-1!",
            path=session_file,
            new_password=new_password,
        )

    with pytest.raises(LoginExpired, match="wants a new password"):
        sign_in(None)
    assert sign_in(lambda: "Bobs-Own-Pass-2!").refresh_token
    assert LoginSession.load().username == "bob@example.com"


def test_from_login_sends_the_refreshed_id_token_as_a_bearer(
    pool: dict[str, Any], session_file: Path
) -> None:
    api = ScriptedApi(answers=[(200, {}, {"job_id": "j_1", "state": "queued"})])
    try:
        LoginSession.sign_in(
            api_url=api.url,
            region=REGION,
            client_id=pool["client_id"],
            username="alice@example.com",
            password=PASSWORD,
            path=session_file,
        )
        kept = json.loads(session_file.read_text())
        kept["expires_at"] = time.time() - 1
        session_file.write_text(json.dumps(kept))
        client = Client.from_login()
        assert client.base_url == api.url
        client.get("j_1")
        refreshed = json.loads(session_file.read_text())["id_token"]
        assert refreshed != kept["id_token"]
        assert api.seen[0].headers["authorization"] == f"Bearer {refreshed}"
    finally:
        api.close()


def test_the_login_command_signs_in_and_prints_no_token(
    pool: dict[str, Any],
    session_file: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(PASSWORD + "\n"))
    code = main(
        [
            "login",
            "--url",
            URL,
            "--client-id",
            pool["client_id"],
            "--region",
            REGION,
            "--username",
            "alice@example.com",
            "--password-stdin",
        ]
    )
    out = capsys.readouterr()
    assert code == 0, out.err
    kept = json.loads(session_file.read_text())
    for secret in (kept["id_token"], kept["access_token"], kept["refresh_token"], PASSWORD):
        assert secret not in out.out + out.err
    assert "logged in as alice@example.com" in out.out and str(session_file) in out.out
    # A wrong password: one line, exit 2, nothing kept
    session_file.unlink()
    monkeypatch.setattr("sys.stdin", io.StringIO("Wrong-Horse-9!\n"))
    code = main(["login", "--url", URL, "--client-id", pool["client_id"], "--region", REGION,
                 "--username", "alice@example.com", "--password-stdin"])  # fmt: skip
    out = capsys.readouterr()
    assert code == 2 and "NotAuthorizedException" in out.err and "Wrong-Horse" not in out.err
    assert not session_file.exists()
    assert main(["logout"]) == 0
    assert "not logged in" in capsys.readouterr().out


def test_a_command_with_the_logged_in_url_and_no_token_uses_the_session(
    pool: dict[str, Any], session_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    api = ScriptedApi(answers=[(200, {}, {"job_id": "j_1", "state": "queued"})])
    try:
        session = LoginSession.sign_in(
            api_url=api.url,
            region=REGION,
            client_id=pool["client_id"],
            username="alice@example.com",
            password=PASSWORD,
            path=session_file,
        )
        assert main(["show", "j_1", "--url", api.url]) == 0
        assert main(["show", "j_1", "--url", api.url, "--token", "given"]) == 0
        assert session.id_token not in capsys.readouterr().out
        first, second = api.seen
        assert first.headers["authorization"] == f"Bearer {session.id_token}"
        assert "x-demo-user" not in first.headers
        assert second.headers["authorization"] == "Bearer given"
    finally:
        api.close()


def test_login_reads_the_url_and_app_client_from_the_stack_outputs(
    pool: dict[str, Any],
    session_file: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import boto3

    outputs = {"ApiUrl": {"Value": URL}, "UserPoolClientId": {"Value": pool["client_id"]}}
    template = {"Resources": {"Queue": {"Type": "AWS::SQS::Queue"}}, "Outputs": outputs}
    boto3.client("cloudformation", region_name=REGION).create_stack(
        StackName="jobs", TemplateBody=json.dumps(template)
    )
    monkeypatch.setattr("sys.stdin", io.StringIO(PASSWORD + "\n"))
    code = main(["login", "--stack", "jobs", "--region", REGION, "--username",
                 "alice@example.com", "--password-stdin"])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    kept = LoginSession.load()
    assert (kept.api_url, kept.client_id) == (URL, pool["client_id"])
    assert main(["login", "--stack", "nope", "--region", REGION, "--username", "a@b.c"]) == 2
    assert "cannot read the outputs of stack nope" in capsys.readouterr().err


def test_a_session_beside_others_files_leaves_their_directory_alone(
    pool: dict[str, Any], tmp_path: Path
) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o755)
    _sign_in(pool, shared / "session.json")
    assert stat.S_IMODE(shared.stat().st_mode) == 0o755  # not ours to change
    assert stat.S_IMODE((shared / "session.json").stat().st_mode) == 0o600


def test_a_session_saved_in_a_shared_directory_never_writes_through_a_planted_link(
    pool: dict[str, Any], tmp_path: Path
) -> None:
    """In a directory others can write (LEASEHOLD_SESSION=/tmp/s.json), someone may plant a
    symlink where the session's temporary file will be: the tokens must not go through it."""
    import os

    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    theirs = tmp_path / "theirs.txt"
    theirs.write_text("")
    theirs.chmod(0o666)
    for pid in range(os.getpid() - 5, os.getpid() + 5):  # every name the old code could pick
        (shared / f".session.json.{pid}.tmp").symlink_to(theirs)
    session = _sign_in(pool, shared / "session.json")
    assert theirs.read_text() == ""  # nothing went through the link
    assert stat.S_IMODE(theirs.stat().st_mode) == 0o666  # nor was it chmod-ed
    assert not (shared / "session.json").is_symlink()
    assert stat.S_IMODE((shared / "session.json").stat().st_mode) == 0o600
    assert LoginSession.load(shared / "session.json") == session


# ----------------------------------------------------------------------------- MFA (OperatorMfa)


def _totp_code(secret: str) -> str:
    """The authenticator app's current code for `secret` (moto checks it as Cognito does)."""
    from moto.cognitoidp.utils import cognito_totp

    return cognito_totp(secret).generate(int(time.time())).decode()


@pytest.fixture
def mfa_pool(pool: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The pool with OperatorMfa=ON (TOTP), alice's authenticator set up, and moto checking
    every code against the secret (MOTO_COGNITO_IDP_USER_POOL_ENABLE_TOTP)."""
    monkeypatch.setenv("MOTO_COGNITO_IDP_USER_POOL_ENABLE_TOTP", "true")
    idp = pool["idp"]
    signed_in = idp.initiate_auth(
        ClientId=pool["client_id"],
        AuthFlow="USER_PASSWORD_AUTH",
        AuthParameters={"USERNAME": "alice@example.com", "PASSWORD": PASSWORD},
    )["AuthenticationResult"]
    secret = idp.associate_software_token(AccessToken=signed_in["AccessToken"])["SecretCode"]
    idp.verify_software_token(AccessToken=signed_in["AccessToken"], UserCode=_totp_code(secret))
    idp.set_user_pool_mfa_config(
        UserPoolId=pool["pool_id"],
        SoftwareTokenMfaConfiguration={"Enabled": True},
        MfaConfiguration="ON",
    )
    return {**pool, "secret": secret}


def test_an_mfa_challenge_without_a_code_says_how_to_give_one(
    mfa_pool: dict[str, Any], session_file: Path
) -> None:
    # Given a pool that asks alice for her authenticator's code
    # When she signs in with her password only
    with pytest.raises(LoginExpired, match="--mfa-code") as raised:
        _sign_in(mfa_pool, session_file)
    # Then she is told how to give it, and nothing is kept
    assert raised.value.code == "mfa_code_required"
    assert not session_file.exists()


def test_an_mfa_code_answers_the_challenge_and_a_wrong_one_is_refused(
    mfa_pool: dict[str, Any], session_file: Path
) -> None:
    def sign_in(code: str) -> LoginSession:
        return LoginSession.sign_in(
            api_url=URL,
            region=REGION,
            client_id=mfa_pool["client_id"],
            username="alice@example.com",
            password=PASSWORD,
            path=session_file,
            mfa_code=lambda: code,
        )

    with pytest.raises(ApiError.Unauthenticated) as raised:
        sign_in("000000" if _totp_code(mfa_pool["secret"]) != "000000" else "111111")
    assert raised.value.code == "code_mismatch_exception"
    assert not session_file.exists()
    assert sign_in(_totp_code(mfa_pool["secret"])).refresh_token
    assert LoginSession.load().username == "alice@example.com"


def test_a_new_user_sets_up_an_authenticator_at_first_sign_in(
    mfa_pool: dict[str, Any], session_file: Path
) -> None:
    # Given bob, made by an administrator with a temporary password, in a pool where MFA is ON
    mfa_pool["idp"].admin_create_user(
        UserPoolId=mfa_pool["pool_id"],
        Username="bob@example.com",
        TemporaryPassword="Temporary-Pass-1!",
        MessageAction="SUPPRESS",
    )
    shown: list[str] = []

    def set_up(secret: str) -> str:
        shown.append(secret)  # what `leasehold login` shows for the authenticator app
        return _totp_code(secret)

    def sign_in(mfa_setup: Any) -> LoginSession:
        return LoginSession.sign_in(
            api_url=URL,
            region=REGION,
            client_id=mfa_pool["client_id"],
            username="bob@example.com",
            password="Temporary-Pass-1!",
            path=session_file,
            new_password=lambda: "Bobs-Own-Pass-2!",
            mfa_setup=mfa_setup,
        )

    # When he cannot set one up here (no terminal), he is told where to
    with pytest.raises(LoginExpired, match="authenticator") as raised:
        sign_in(None)
    assert raised.value.code == "mfa_setup_required"
    # Then with one, his new password and his authenticator's code sign him in
    mfa_pool["idp"].admin_set_user_password(
        UserPoolId=mfa_pool["pool_id"],
        Username="bob@example.com",
        Password="Temporary-Pass-1!",
        Permanent=False,
    )
    assert sign_in(set_up).refresh_token
    assert shown == [mfa_pool["secret"]]


def test_the_login_command_takes_the_mfa_code(
    mfa_pool: dict[str, Any],
    session_file: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = ["login", "--url", URL, "--client-id", mfa_pool["client_id"], "--region", REGION,
            "--username", "alice@example.com", "--password-stdin"]  # fmt: skip
    # Without a code and no terminal: one line that names the option, exit 2
    monkeypatch.setattr("sys.stdin", io.StringIO(PASSWORD + "\n"))
    assert main(args) == 2
    assert "--mfa-code" in capsys.readouterr().err
    # With --mfa-code, and with LEASEHOLD_MFA_CODE
    monkeypatch.setattr("sys.stdin", io.StringIO(PASSWORD + "\n"))
    assert main([*args, "--mfa-code", _totp_code(mfa_pool["secret"])]) == 0
    session_file.unlink()
    monkeypatch.setenv("LEASEHOLD_MFA_CODE", _totp_code(mfa_pool["secret"]))
    monkeypatch.setattr("sys.stdin", io.StringIO(PASSWORD + "\n"))
    assert main(args) == 0, capsys.readouterr().err
    assert LoginSession.load().username == "alice@example.com"
