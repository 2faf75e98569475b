"""`leasehold docs put`: a document for doc_prep jobs, uploaded to the running local stack."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from leasehold_dev.cli.target import CliError, add_state_option, local_stack


def _cmd_docs_put(args: argparse.Namespace) -> int:
    """Upload a document for doc_prep jobs to the running local stack's documents bucket, under
    the demo user's tenant, and print the `s3_key` a job names it by (stdout: the key alone)."""
    from leasehold_dev.local.gateway import DEMO_USERS
    from leasehold_dev.local.stack import client

    _, stack = local_stack(args)
    bucket = stack.outputs.get("DocumentsBucket")
    if not bucket:
        raise CliError("the running local stack has no documents bucket; restart it (make up)")
    # The rules a document must meet are the agent's own. Importing the agent reads its
    # settings, as a function's cold start does: the one it requires is this stack's bucket.
    os.environ.setdefault("DOCUMENTS_BUCKET", bucket)
    from leasehold_apps.doc_agent.spec import (
        MAX_DOCUMENT_BYTES,
        DocumentUnreadableError,
        decode_document,
        document_prefix,
        tenant_of_key,
    )

    path = Path(args.file)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise CliError(f"cannot read {args.file}: {exc.strerror or exc}") from exc
    try:
        decode_document(data)
    except DocumentUnreadableError as exc:
        raise CliError(f"{args.file}: {exc} (a doc_prep document is UTF-8 text ≤ "
                       f"{MAX_DOCUMENT_BYTES} bytes)") from exc  # fmt: skip
    tenant = DEMO_USERS[args.user]["custom:tenant"]
    key = document_prefix(tenant) + (args.name or path.name)
    if tenant_of_key(key) != tenant:
        raise CliError(
            f"{key!r} is not a usable document key: use a name of A-Z a-z 0-9 ! _ . * ' ( ) - "
            "(pass --name to choose one)"
        )
    client("s3", stack.endpoint).put_object(
        Bucket=bucket, Key=key, Body=data, ContentType="text/plain; charset=utf-8"
    )
    print(f"uploaded {len(data)} bytes for {args.user} (tenant {tenant}) to s3://{bucket}/{key}",
          file=sys.stderr)  # fmt: skip
    print(key)
    return 0


def add_docs_commands(commands: Any, demo_users: list[str]) -> None:
    """`docs put`."""
    docs = commands.add_parser("docs", help="documents for doc_prep jobs (local stack)")
    docs_commands = docs.add_subparsers(dest="docs_command", required=True)
    put = docs_commands.add_parser(
        "put", help="upload FILE under the user's tenant; prints the s3_key for a doc_prep job"
    )
    put.add_argument("file")
    put.add_argument("--user", required=True, choices=sorted(demo_users))
    put.add_argument("--name", help="the document's name in the bucket (default: FILE's name)")
    add_state_option(put)
    put.set_defaults(run=_cmd_docs_put)
