"""Owners whose tenant and user ids, joined, read alike — `a|b`/`c` and `a`/`b|c` — are two
owners through the API (issue 28 item 6): one Idempotency-Key gives each its own job, each
reads its own and lists only its own (moto, in-process, through the Api handler)."""

from __future__ import annotations

import pytest

from tests.support.api import Call

SUBMIT = {"kind": "synthetic", "payload": {"steps": [{"name": "a"}]}}


def _claims(tenant: str, user: str) -> dict[str, str]:
    return {"sub": user, "custom:tenant": tenant}


@pytest.mark.parametrize(
    ("first", "second"),
    [
        (("a|b", "c"), ("a", "b|c")),  # the hashed source's separator (a JWT `sub` auth0|123)
        (("a#b", "c"), ("a", "b#c")),  # the table keys' separator
        (("acme", "auth0|1%7C2"), ("acme", "auth0|1|2")),  # the escape spelled out
        (("t%23x", "u"), ("t#x", "u")),
    ],
)
def test_two_owners_with_one_key_get_their_own_jobs(
    call: Call, first: tuple[str, str], second: tuple[str, str]
) -> None:
    ids = []
    for tenant, user in (first, second):
        status, body, _ = call(
            "api-submit-job.json",
            body=SUBMIT,
            claims=_claims(tenant, user),
            headers={"idempotency-key": "same-key"},
        )
        assert status == 202, body
        ids.append(body["job_id"])
    assert ids[0] != ids[1]  # the second owner's job was created, not the first one's handed out
    for (tenant, user), job_id, other in zip((first, second), ids, reversed(ids), strict=True):
        status, view, _ = call("api-get-job.json", path_id=job_id, claims=_claims(tenant, user))
        assert status == 200 and view["job_id"] == job_id
        status, _, _ = call("api-get-job.json", path_id=other, claims=_claims(tenant, user))
        assert status == 404  # the other owner's job is not this one's to read
        status, page, _ = call("api-list-jobs.json", query={}, claims=_claims(tenant, user))
        assert status == 200 and [job["job_id"] for job in page["jobs"]] == [job_id]


def test_an_auth0_style_subject_keeps_its_keyed_job_across_a_repeat(call: Call) -> None:
    claims = _claims("study-group", "auth0|5f7c8ec7c33c6c004bbafe82")
    headers = {"idempotency-key": "k-auth0"}
    _, first, _ = call("api-submit-job.json", body=SUBMIT, claims=claims, headers=headers)
    status, again, _ = call("api-submit-job.json", body=SUBMIT, claims=claims, headers=headers)
    assert status == 202 and again["job_id"] == first["job_id"]
    # the id is the one the plain join gave this user before identities were encoded
    assert first["job_id"] == "j_" + _plain_join_hash(
        "", "study-group", "auth0|5f7c8ec7c33c6c004bbafe82", "k-auth0"
    )


def _plain_join_hash(*parts: str) -> str:
    import hashlib

    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:22]
