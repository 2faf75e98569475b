"""The template's S3 bucket properties applied through the S3 API: moto's CloudFormation makes a
bucket with its encryption only (the local stack and the tests both complete it here)."""

from __future__ import annotations

from typing import Any


def apply_bucket_settings(s3: Any, name: str, props: dict[str, Any]) -> None:
    """The template's bucket properties through the S3 API, in the shapes S3 takes."""
    encryption = props["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    s3.put_bucket_encryption(
        Bucket=name,
        ServerSideEncryptionConfiguration={
            "Rules": [
                {"ApplyServerSideEncryptionByDefault": rule["ServerSideEncryptionByDefault"]}
                for rule in encryption
            ]
        },
    )
    s3.put_public_access_block(
        Bucket=name, PublicAccessBlockConfiguration=props["PublicAccessBlockConfiguration"]
    )
    s3.put_bucket_ownership_controls(Bucket=name, OwnershipControls=props["OwnershipControls"])
    rules = []
    for rule in props["LifecycleConfiguration"]["Rules"]:
        converted: dict[str, Any] = {
            "ID": rule["Id"],
            "Status": rule["Status"],
            "Filter": {"Prefix": rule.get("Prefix", "")},
        }
        if "ExpirationInDays" in rule:
            converted["Expiration"] = {"Days": rule["ExpirationInDays"]}
        if "AbortIncompleteMultipartUpload" in rule:
            converted["AbortIncompleteMultipartUpload"] = rule["AbortIncompleteMultipartUpload"]
        rules.append(converted)
    s3.put_bucket_lifecycle_configuration(Bucket=name, LifecycleConfiguration={"Rules": rules})
