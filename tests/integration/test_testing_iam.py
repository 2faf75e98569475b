"""A user's testbed judges the engine's calls by the deployed roles (docs/decisions.md IAM6):
a kind whose step reaches a resource its worker's role does not name fails here as it would
after `sam deploy`, and one the template grants works."""

from __future__ import annotations

from typing import Any

import boto3
from botocore.exceptions import ClientError

from leasehold import Kind, StepContext
from leasehold.testing import LeaseholdTestbed
from leasehold.testing.mocking import REGION

reader = Kind("reader")


@reader.step()
def read(ctx: StepContext, payload: dict[str, Any]) -> dict[str, Any]:
    s3 = boto3.session.Session(region_name=REGION).client("s3")
    try:
        body = s3.get_object(Bucket=payload["bucket"], Key=payload["key"])["Body"].read()
    except ClientError as exc:
        return {"error": exc.response["Error"]["Code"]}
    return {"text": body.decode()}


def test_a_kind_reading_a_bucket_the_worker_role_does_not_name_is_access_denied() -> None:
    # Given a bucket of the user's own, which no role in the template names
    with LeaseholdTestbed([reader]) as tb:
        tb.client("s3").create_bucket(Bucket="mine")
        tb.client("s3").put_object(Bucket="mine", Key="tenants/t/documents/a", Body=b"hi")
        # When a job's step reads it, in the worker
        job_id = tb.submit("reader", {"bucket": "mine", "key": "tenants/t/documents/a"})
        tb.run_until_idle()
        # Then S3 answers as on AWS: AccessDenied (the worker's role is the deployed one)
        assert tb.view(job_id)["result"] == {"error": "AccessDenied"}
        # And the test's own client reads it (it acts as no role)
        assert tb.client("s3").get_object(Bucket="mine", Key="tenants/t/documents/a")


def test_the_templates_documents_bucket_is_readable_under_the_granted_prefix_only() -> None:
    # Given the user's bucket stands for the template's DocumentsBucket
    with LeaseholdTestbed([reader], resources={"DocumentsBucket": "docs"}) as tb:
        s3 = tb.client("s3")
        s3.create_bucket(Bucket="docs")
        s3.put_object(Bucket="docs", Key="tenants/t/documents/a", Body=b"hi")
        s3.put_object(Bucket="docs", Key="elsewhere/a", Body=b"no")
        # When jobs read under the granted prefix, and outside it
        inside = tb.submit("reader", {"bucket": "docs", "key": "tenants/t/documents/a"})
        outside = tb.submit("reader", {"bucket": "docs", "key": "elsewhere/a"})
        tb.run_until_idle()
        # Then WorkerRole's s3:GetObject on tenants/*/documents/* decides
        assert tb.view(inside)["result"] == {"text": "hi"}
        assert tb.view(outside)["result"] == {"error": "AccessDenied"}
        assert tb.roles["WorkerFunction"].name == "WorkerRole"
