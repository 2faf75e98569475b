"""IAM is enforced here as on AWS (docs/decisions.md, "Real AWS: IAM enforced locally"): each
function's calls are judged by its own role in the translated template, and a call the role
does not allow fails as AWS fails it. moto alone allows everything."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from leasehold.domain.errors import StoreUnavailableError
from leasehold.domain.states import JobState
from leasehold.handlers import sweeper as sweeper_module
from leasehold.handlers import wiring
from leasehold.store.items import slots_key
from leasehold.store.slots import SlotStore, new_token
from leasehold.testing import iam
from leasehold_dev.local.invoke import LocalContext, load_handler
from leasehold_dev.local.stack import StackInfo, create_stack
from tests.conftest import load_event
from tests.support.api import CACHED, Call
from tests.support.harness import ALICE, LEASE_MS, SLOT_LIMIT, Harness, make_job
from tests.support.resources import REGION, TEMPLATE, function_roles


def statement_with(role: str, action: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """The statement of `role`'s inline policy that lists `action`, in a translated template."""

    def find(template: dict[str, Any]) -> dict[str, Any]:
        for policy in template["Resources"][role]["Properties"]["Policies"]:
            for statement in policy["PolicyDocument"]["Statement"]:
                if action in statement["Action"]:
                    return statement
        raise AssertionError(f"{role} has no statement with {action}")

    return find


def strike(role: str, action: str) -> Callable[[dict[str, Any]], None]:
    """An edit of the translated template: `action` removed from `role`."""

    def edit(template: dict[str, Any]) -> None:
        statement_with(role, action)(template)["Action"].remove(action)

    return edit


def leak_slots(harness: Harness) -> None:
    """Fill ALICE's slots with entries of jobs that hold none (a worker died between its
    outcome and its release), old enough for the repair."""
    slots = SlotStore(harness.stores.table, SLOT_LIMIT, 2 * LEASE_MS)
    old = new_token(harness.clock.now_ms())
    for n in range(SLOT_LIMIT):
        assert slots.take(ALICE, f"j_leaked_{n}", old).took
    harness.clock.advance(2 * LEASE_MS + 1)


def test_a_call_its_role_does_not_allow_is_access_denied_as_on_aws(harness: Harness) -> None:
    # Given the API's role without dynamodb:Query (struck from the translated template)
    harness.edit_roles(strike("ApiRole", "dynamodb:Query"))
    # When the API's client queries the table, acting as the API
    with harness.acting("ApiFunction"), pytest.raises(ClientError) as raised:
        harness.dynamodb.query(
            TableName=harness.table,
            KeyConditionExpression="pk = :p",
            ExpressionAttributeValues={":p": {"S": "JOB#x"}},
        )
    # Then DynamoDB's answer to an unauthorised call: AccessDeniedException, HTTP 400
    error = raised.value.response
    assert error["Error"]["Code"] == "AccessDeniedException"
    assert error["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert (
        "dynamodb:Query on resource: arn:aws:dynamodb:us-east-1:123456789012:table/jobs"
        in (error["Error"]["Message"])
    )
    # And the same call as no function (the test's own eyes) is moto's, allowed
    harness.dynamodb.query(
        TableName=harness.table,
        KeyConditionExpression="pk = :p",
        ExpressionAttributeValues={":p": {"S": "JOB#x"}},
    )


def test_a_struck_action_fails_the_service_as_a_store_outage(harness: Harness) -> None:
    # Given the API's role without dynamodb:PutItem (a submit is a transaction of puts)
    harness.edit_roles(strike("ApiRole", "dynamodb:PutItem"))
    # When a job is submitted through the API's service
    with pytest.raises(StoreUnavailableError, match="AccessDeniedException"):
        harness.submit()
    # Then nothing was written (the call never reached the table)
    assert harness.dynamodb.scan(TableName=harness.table)["Count"] == 0


def test_sqs_answers_access_denied_with_its_own_code(harness: Harness) -> None:
    # Given the relay's role without sqs:SendMessage
    harness.edit_roles(strike("RelayRole", "sqs:SendMessage"))
    # When the relay's client sends a batch (authorised by sqs:SendMessage)
    with harness.acting("RelayFunction"), pytest.raises(ClientError) as raised:
        harness.sqs.send_message_batch(
            QueueUrl=harness.queues["work"], Entries=[{"Id": "1", "MessageBody": "{}"}]
        )
    # Then SQS's code and status: AccessDenied, 403
    assert raised.value.response["Error"]["Code"] == "AccessDenied"
    assert raised.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
    assert "sqs:SendMessage on resource: arn:aws:sqs:us-east-1:123456789012:work" in str(
        raised.value
    )


def test_slot_repair_works_under_the_workers_role_as_deployed(harness: Harness) -> None:
    # Given ALICE's slots all held by leaked entries past their grace
    leak_slots(harness)
    job_id = harness.submit()
    # When a worker (acting as WorkerRole, template.yaml as it is) delivers her job
    harness.deliver(job_id)
    # Then the repair read the leaked jobs (BatchGetItem), freed the slots and the job ran
    assert harness.state(job_id) == JobState.SUCCEEDED.value


def test_slot_repair_without_batch_get_item_is_access_denied(harness: Harness) -> None:
    # Given the worker's role without dynamodb:BatchGetItem (the template before issue 27)
    harness.edit_roles(strike("WorkerRole", "dynamodb:BatchGetItem"))
    leak_slots(harness)
    job_id = harness.submit()
    refused = iam.JUDGEMENTS.refused
    # When a worker delivers her job, the repair's BatchGetItem is refused
    result = harness.deliver(job_id)
    # Then the claim fails as a store outage (the wake-up is re-sent), the job waits, queued,
    # and the leaked entries stay: on AWS, a user whose slots are never repaired
    assert result.outcome == "store_unavailable"
    assert iam.JUDGEMENTS.refused == refused + 1
    assert harness.state(job_id) == JobState.QUEUED.value
    with iam.acting_as(None):
        item = harness.dynamodb.get_item(TableName=harness.table, Key=slots_key(ALICE))["Item"]
    assert {f"j_leaked_{n}" for n in range(SLOT_LIMIT)} <= set(item)


def test_every_role_of_the_template_is_resolved(harness: Harness) -> None:
    # The four functions, each with its own role, none sharing another's
    assert {f: r.name for f, r in harness.roles.items()} == {
        "ApiFunction": "ApiRole",
        "RelayFunction": "RelayRole",
        "WorkerFunction": "WorkerRole",
        "SweeperFunction": "SweeperRole",
    }


def test_the_api_handlers_calls_are_judged_as_the_api(call: Call) -> None:
    # Given the Api handler invoked as its function (the `call` fixture acts as ApiRole)
    judged = iam.JUDGEMENTS.judged
    # When it accepts a job and lists them (a transaction, a query on by_owner)
    assert call("api-submit-job.json", body=make_job())[0] == 202
    assert call("api-list-jobs.json", query={})[0] == 200
    # Then each of its calls was judged by the API's role, and allowed
    assert iam.JUDGEMENTS.judged >= judged + 2


def test_the_worker_reads_the_planner_key_only_when_the_template_grants_that_secret(
    harness: Harness,
) -> None:
    # Given a secret in moto, and the worker's role with and without the key's parameter
    secrets = boto3.session.Session(region_name=REGION).client("secretsmanager")
    arn = secrets.create_secret(Name="planner-key", SecretString="k")["ARN"]
    other = secrets.create_secret(Name="other", SecretString="o")["ARN"]
    table = {"TableName": harness.table, "LatestStreamArn": harness.stream_arn}
    granted = function_roles(
        table, harness.queues, parameters={"HostedPlannerApiKeySecretArn": arn}
    )["WorkerFunction"]
    default = function_roles(table, harness.queues)["WorkerFunction"]
    # Then with the parameter (WorkerHostedPlannerKeyPolicy) the worker reads that secret only
    with iam.acting_as(granted):
        assert secrets.get_secret_value(SecretId=arn)["SecretString"] == "k"
        with pytest.raises(ClientError, match="AccessDeniedException"):
            secrets.get_secret_value(SecretId=other)
    # And without it, no secret at all; the API never reads one
    with iam.acting_as(default), pytest.raises(ClientError, match="AccessDeniedException"):
        secrets.get_secret_value(SecretId=arn)
    with harness.acting("ApiFunction"), pytest.raises(ClientError, match="AccessDenied"):
        secrets.get_secret_value(SecretId=arn)


def test_the_local_stack_records_each_functions_role_from_what_it_created(
    moto: None, tmp_path: Path
) -> None:
    # Given the local stack created in moto from template.yaml
    info = create_stack("", TEMPLATE)
    info.save(tmp_path / "stack.json")
    loaded = StackInfo.load(tmp_path / "stack.json")
    # Then each function has its own role, resolved against the stack's own resources
    assert {f: loaded.roles[f]["role"] for f in info.functions} == {
        "ApiFunction": "ApiRole",
        "RelayFunction": "RelayRole",
        "WorkerFunction": "WorkerRole",
        "SweeperFunction": "SweeperRole",
    }
    table = f"arn:aws:dynamodb:us-east-1:123456789012:table/{info.outputs['JobsTable']}"
    worker, relay = loaded.role("WorkerFunction"), loaded.role("RelayFunction")
    assert worker.allows("dynamodb:BatchGetItem", table)
    assert not worker.allows("dynamodb:Query", f"{table}/index/by_state")
    (stream,) = info.stream_mappings
    assert relay.allows("dynamodb:GetRecords", stream.stream_arn)
    assert not relay.allows("dynamodb:GetItem", table)


def test_a_handler_the_local_stack_loads_acts_as_its_own_role(
    moto: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the local stack in moto, and the Api and Sweeper handlers loaded as it loads them
    info = create_stack("", TEMPLATE)
    saved = dict(os.environ)  # load_handler sets the functions' environment
    for cached in CACHED:
        cached.cache_clear()
    try:
        api_handler = load_handler(info, "ApiFunction")
        # When the API lists a user's jobs (a Query on by_owner, which ApiRole allows)
        answer = api_handler(load_event("api-list-jobs.json"), LocalContext("api"))
        assert answer["statusCode"] == 200
        # Then the same runtime's clients, used by the sweeper's handler, act as SweeperRole:
        # by_owner is not the sweeper's
        sweeper_role = info.role("SweeperFunction")
        index = f"arn:aws:dynamodb:us-east-1:123456789012:table/{info.outputs['JobsTable']}"
        assert not sweeper_role.allows("dynamodb:Query", f"{index}/index/by_owner")
        runtime_client = wiring.runtime().stores.table.client
        seen: list[Any] = []

        def list_by_owner(event: Any, context: Any) -> Any:
            seen.append(iam.acting())
            return runtime_client.query(
                TableName=info.outputs["JobsTable"],
                IndexName="by_owner",
                KeyConditionExpression="gsi2pk = :p",
                ExpressionAttributeValues={":p": {"S": "x"}},
            )

        monkeypatch.setattr(sweeper_module, "handler", list_by_owner)
        with pytest.raises(ClientError, match="AccessDeniedException"):
            load_handler(info, "SweeperFunction")({}, LocalContext("sweeper"))
        assert seen and seen[0] is not None and seen[0].name == "SweeperRole"
    finally:
        for cached in CACHED:
            cached.cache_clear()
        os.environ.clear()
        os.environ.update(saved)
