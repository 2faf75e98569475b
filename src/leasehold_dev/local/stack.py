"""Create the stack of template.yaml inside an embedded moto server and describe what was made:
physical names, each function's environment, its event-source mappings and schedule."""

from __future__ import annotations

import contextlib
import io
import json
import socket
import threading
import zipfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import boto3

from leasehold.domain.errors import LeaseholdError
from leasehold.store.queue import MAX_QUEUE_SHARDS
from leasehold.testing.iam import Role
from leasehold.testing.roles import RoleDocuments
from leasehold_dev.local.moto.durable import RESTORE_PATH
from leasehold_dev.local.moto.server import detach_invocations, post
from leasehold_dev.local.processes import ProcessRef
from leasehold_dev.local.roles import resource_attributes, role_documents, role_of
from leasehold_dev.local.template import (
    LOCAL_CODE_BUCKET,
    LOCAL_CODE_KEY,
    Route,
    http_routes,
    load_template,
    translate,
)

REGION = "us-east-1"
STACK_NAME = "leasehold-local"
LOCAL_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}

LOCAL_PARAMETERS = {
    # Short enough for tests and the demo; the deployed defaults are in template.yaml.
    "LeaseSeconds": "4",
    "BackoffBaseMs": "500",
    "BackoffCapMs": "4000",
    "UserConcurrencyLimit": "2",
    "SlotWaitSeconds": "1",
    "LostWakeupGraceSeconds": "5",
    "WorkerTimeoutSeconds": "30",
    "QueueVisibilitySeconds": "180",
    "MaxStepSeconds": "20",
    "TitleFetcher": "fixture",
    # 8 shards, not the deployed 64: moto answers a Query by scanning, so every shard costs a
    # local request time (decision SH4); 8 still shows keys spread (tests/e2e).
    "IndexShards": "8",
    # Every tenant may ask for high priority on one machine (the deployed default: operators
    # only, decision Q1); `--parameter HighPriorityTenants=` gives the deployed rule locally.
    "HighPriorityTenants": "*",
    # The runner calls the sweeper every second, not every SweepSchedule period, so each pass
    # reads up to rate x 60 a second here (decision SP1): the defaults are plenty on one
    # machine. Two segments, so the local sweeper runs its passes in threads as deployed ones
    # with SweepSegments > 1 do (decision SP3).
    "SweepSegments": "2",
}


class StackError(LeaseholdError, RuntimeError):
    """The local stack cannot be started, found or used; the message says what to do."""


class PortBusyError(StackError):
    """The gateway's port is taken on 127.0.0.1 (the CLI words the advice for its user)."""

    def __init__(self, port: int) -> None:
        super().__init__(f"port {port} on 127.0.0.1 is busy")
        self.port = port


@dataclass(frozen=True)
class FunctionInfo:
    logical_id: str
    name: str
    handler: str
    environment: dict[str, str]
    timeout_seconds: int = 60


@dataclass(frozen=True)
class StreamMapping:
    function: str
    stream_arn: str
    batch_size: int
    filters: list[dict[str, Any]]
    report_item_failures: bool
    max_retries: int
    on_failure_arn: str | None


PRIORITY_QUEUE_OUTPUTS = {
    "high": "HighPriorityQueue",
    "normal": "WorkQueue",
    "low": "LowPriorityQueue",
}
"""Each priority's queue in the template (decision F4)."""
QUEUE_SHARD_OUTPUTS = tuple(f"WorkQueueShard{n}" for n in range(1, MAX_QUEUE_SHARDS))
"""The normal queue's other shards, those of them `QueueShards` makes (decision QS1)."""


@dataclass(frozen=True)
class QueueMapping:
    function: str
    queue_url: str
    batch_size: int
    report_item_failures: bool


@dataclass
class StackInfo:
    endpoint: str
    functions: dict[str, FunctionInfo]
    stream_mappings: list[StreamMapping]
    queue_mappings: list[QueueMapping]
    routes: list[Route]
    schedules: dict[str, str]
    outputs: dict[str, str] = field(default_factory=dict)
    local_environment: dict[str, str] = field(default_factory=dict)
    """Variables only the local stack gives its functions (its own providers, faults)."""
    api_url: str = ""
    """The local gateway's base URL (set once it listens)."""
    pid: int = 0
    """The `leasehold local up` process."""
    pid_started: int = 0
    """Its start time (see leasehold_dev.local.processes), so a recycled pid is not taken for it."""
    data_dir: str = ""
    """The data directory it keeps its state in ("" : none, everything is in memory)."""
    roles: dict[str, RoleDocuments] = field(default_factory=dict)
    """Each function's execution role as the translated template deploys it, resolved against
    this stack's resources (leasehold_dev.local.roles): what its calls are judged by."""

    def role(self, function: str) -> Role:
        """The role `function`'s calls act as (leasehold.testing.iam); a stack without one for
        it is refused: every function runs with its own role's permissions."""
        if function not in self.roles:
            raise StackError(f"no execution role recorded for {function}: recreate the stack")
        return role_of(self.roles[function])

    @property
    def process(self) -> ProcessRef:
        """The `local up` process that serves this stack (pid 0: none recorded yet)."""
        return ProcessRef(self.pid, self.pid_started)

    def environment(self, function: str) -> dict[str, str]:
        """The function's environment as the template resolves it, pointed at the local stack."""
        return {
            **self.functions[function].environment,
            **self.local_environment,
            **LOCAL_CREDENTIALS,
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_DEFAULT_REGION": REGION,
            "AWS_REGION": REGION,
            "AWS_LAMBDA_FUNCTION_NAME": self.functions[function].name,
            "POWERTOOLS_METRICS_DISABLED": "true",
        }

    def work_queue_mapping(self) -> QueueMapping:
        """The worker's mapping of the (normal-priority) work queue."""
        work = self.outputs.get("WorkQueue")
        for mapping in self.queue_mappings:
            if mapping.queue_url == work:
                return mapping
        return self.queue_mappings[0]

    def worker_mappings(self) -> list[QueueMapping]:
        """The worker's mappings, one per priority queue and normal shard: high, then normal
        (the work queue, then its shards), then low."""
        names = ["HighPriorityQueue", "WorkQueue", *QUEUE_SHARD_OUTPUTS, "LowPriorityQueue"]
        order = [self.outputs.get(name) for name in names]
        worker = self.work_queue_mapping().function
        mine = [m for m in self.queue_mappings if m.function == worker]
        return sorted(mine, key=lambda m: order.index(m.queue_url) if m.queue_url in order else 9)

    def function_for(self, handler_suffix: str) -> str:
        for logical_id, info in self.functions.items():
            if info.handler.endswith(handler_suffix):
                return logical_id
        raise StackError(f"no function with a handler ending in {handler_suffix}")

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(asdict(self), indent=2))

    @staticmethod
    def load(path: Path) -> StackInfo:
        if not path.is_file():
            raise StackError(f"no local stack is running (no {path}); start one with `make up`")
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise StackError(f"cannot read the local stack's state file {path}: {exc}") from exc
        return StackInfo(
            endpoint=doc["endpoint"],
            functions={k: FunctionInfo(**v) for k, v in doc["functions"].items()},
            stream_mappings=[StreamMapping(**m) for m in doc["stream_mappings"]],
            queue_mappings=[QueueMapping(**m) for m in doc["queue_mappings"]],
            routes=[Route(**r) for r in doc["routes"]],
            schedules=doc["schedules"],
            outputs=doc.get("outputs", {}),
            local_environment=doc.get("local_environment", {}),
            api_url=doc.get("api_url", ""),
            pid=doc.get("pid", 0),
            pid_started=doc.get("pid_started", 0),
            data_dir=doc.get("data_dir", ""),
            roles=doc.get("roles", {}),
        )


def check_port_free(port: int) -> None:
    """Raises PortBusyError when 127.0.0.1:`port` cannot be bound."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError as exc:
            raise PortBusyError(port) from exc


_SESSION: list[Any] = []  # the one boto3 session of the local stack's clients, once made
_SESSION_LOCK = threading.Lock()


def _session(endpoint: str | None) -> Any:
    """One session for every client of a stack's server: a session keeps the service models it
    loaded, and loading them again was a tenth of a second a client at every `local up`. With
    endpoint None (moto's in-process mock) a new one each time, as before: a session takes its
    handlers when made, and one made before moto was imported would not be mocked."""
    if endpoint is None:
        return boto3.session.Session()
    with _SESSION_LOCK:
        if not _SESSION:
            _SESSION.append(boto3.session.Session())
        return _SESSION[0]


def client(service: str, endpoint: str | None) -> Any:
    """A client for the local stack (or, with endpoint None, for moto's in-process mock)."""
    session = _session(endpoint or None)
    with _SESSION_LOCK:  # a session is not thread-safe; the clients it makes are
        return session.client(
            service,
            endpoint_url=endpoint or None,
            region_name=REGION,
            aws_access_key_id=LOCAL_CREDENTIALS["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=LOCAL_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        )


def create_stack(
    endpoint: str, template_path: Path, parameters: dict[str, str] | None = None
) -> StackInfo:
    """Translate template.yaml and create it in moto's CloudFormation; then read back what the
    stack made. Resources moto skips (Cognito, ApiGatewayV2, alarms) are emulated or absent."""
    from leasehold_dev.local.rules import parameter_values, rule_problems

    template = load_template(template_path)
    merged = {**LOCAL_PARAMETERS, **(parameters or {})}
    # moto's CloudFormation ignores Rules; AWS refuses the stack before making anything
    refused = rule_problems(template, parameter_values(template, merged))
    if refused:
        raise StackError("the template's Rules refuse these parameters: " + "; ".join(refused))
    translated = translate(template, REGION)
    s3 = client("s3", endpoint)
    s3.create_bucket(Bucket=LOCAL_CODE_BUCKET)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("README.txt", "local stack: handlers run in-process, not from this zip")
    s3.put_object(Bucket=LOCAL_CODE_BUCKET, Key=LOCAL_CODE_KEY, Body=buffer.getvalue())
    cloudformation = client("cloudformation", endpoint)
    cloudformation.create_stack(
        StackName=STACK_NAME,
        TemplateBody=json.dumps(translated),
        Capabilities=["CAPABILITY_IAM", "CAPABILITY_AUTO_EXPAND"],
        Parameters=[{"ParameterKey": k, "ParameterValue": v} for k, v in merged.items()],
    )
    stack = cloudformation.describe_stacks(StackName=STACK_NAME)["Stacks"][0]
    if stack["StackStatus"] != "CREATE_COMPLETE":
        raise StackError(f"the local stack did not create: {stack['StackStatus']}")
    info = describe_stack(endpoint, template)
    info.roles = _function_roles(cloudformation, translated, merged, info)
    _complete_documents_bucket(s3, template, info)
    detach_invocations(endpoint)
    return info


def _function_roles(
    cloudformation: Any, translated: dict[str, Any], parameters: dict[str, str], info: StackInfo
) -> dict[str, RoleDocuments]:
    """Each function's role, its policies resolved against what the stack created (the
    table's stream as the relay's mapping names it)."""
    listed = cloudformation.list_stack_resources(StackName=STACK_NAME)["StackResourceSummaries"]
    physical = {
        r["LogicalResourceId"]: r["PhysicalResourceId"]
        for r in listed
        if r.get("PhysicalResourceId")
    }
    by_name = {name: logical_id for logical_id, name in physical.items()}
    extra = {}
    for mapping in info.stream_mappings:  # arn:…:table/<name>/stream/<label>
        table = mapping.stream_arn.split(":table/", 1)[-1].split("/stream/", 1)[0]
        if table in by_name:
            extra[by_name[table]] = {"StreamArn": mapping.stream_arn}
    attributes = resource_attributes(translated, physical, region=REGION, extra=extra)
    return role_documents(
        translated, attributes, parameters=parameters, region=REGION, stack_name=STACK_NAME
    )


DURABLE_TYPES = {"AWS::DynamoDB::Table": "tables", "AWS::S3::Bucket": "buckets"}


def durable_resources(endpoint: str, template_path: Path) -> dict[str, dict[str, str]]:
    """Every table and bucket of the template (logical id → the stack's physical name): what
    the data directory keeps. A table or bucket the template adds is kept with no change here."""
    template = load_template(template_path)
    cloudformation = client("cloudformation", endpoint)
    listed = cloudformation.list_stack_resources(StackName=STACK_NAME)["StackResourceSummaries"]
    physical = {r["LogicalResourceId"]: r.get("PhysicalResourceId", "") for r in listed}
    kept: dict[str, dict[str, str]] = {"tables": {}, "buckets": {}}
    for logical_id, resource in template["Resources"].items():
        kind = DURABLE_TYPES.get(str(resource.get("Type")))
        if kind and physical.get(logical_id):
            kept[kind][logical_id] = physical[logical_id]
    return kept


def restore_data(endpoint: str, resources: dict[str, dict[str, str]]) -> dict[str, Any]:
    """Ask the moto server to load its data directory into `resources` and journal them from
    now on; what it restored (leasehold_dev.local.moto.durable.Restored)."""
    import urllib.error

    try:
        answer = post(endpoint + RESTORE_PATH, json.dumps(resources).encode(), timeout=300)
    except urllib.error.HTTPError as exc:
        said = exc.read().decode(errors="replace")
        with contextlib.suppress(ValueError, AttributeError):
            said = json.loads(said)["error"]
        raise StackError(f"the data directory could not be restored: {said}") from exc
    restored: dict[str, Any] = json.loads(answer)
    return restored


def _complete_documents_bucket(s3: Any, template: dict[str, Any], info: StackInfo) -> None:
    """moto's CloudFormation makes the documents bucket with its encryption only: the public
    access block, ownership controls and lifecycle rules of the template are applied here
    through the S3 API, so the local bucket is the template's bucket."""
    from leasehold_dev.local.buckets import apply_bucket_settings

    for name in ("DocumentsBucket", "DataBucket"):
        bucket = info.outputs.get(name)
        if bucket:
            apply_bucket_settings(s3, bucket, template["Resources"][name]["Properties"])


def describe_stack(endpoint: str, template: dict[str, Any]) -> StackInfo:
    cloudformation = client("cloudformation", endpoint)
    resources = cloudformation.list_stack_resources(StackName=STACK_NAME)["StackResourceSummaries"]
    physical = {r["LogicalResourceId"]: r.get("PhysicalResourceId", "") for r in resources}
    lambda_client = client("lambda", endpoint)
    sqs = client("sqs", endpoint)
    functions: dict[str, FunctionInfo] = {}
    name_to_logical: dict[str, str] = {}
    for logical_id, resource in template["Resources"].items():
        if resource.get("Type") != "AWS::Serverless::Function":
            continue
        config = lambda_client.get_function_configuration(FunctionName=physical[logical_id])
        env = (config.get("Environment") or {}).get("Variables") or {}
        functions[logical_id] = FunctionInfo(
            logical_id=logical_id,
            name=config["FunctionName"],
            handler=config["Handler"],
            environment={k: str(v) for k, v in env.items()},
            timeout_seconds=int(config.get("Timeout") or 60),
        )
        name_to_logical[config["FunctionArn"]] = logical_id
    streams: list[StreamMapping] = []
    queues: list[QueueMapping] = []
    for mapping in lambda_client.list_event_source_mappings()["EventSourceMappings"]:
        function = name_to_logical.get(mapping["FunctionArn"])
        if function is None:
            continue
        report = "ReportBatchItemFailures" in (mapping.get("FunctionResponseTypes") or [])
        source = mapping["EventSourceArn"]
        if ":dynamodb:" in source:
            streams.append(
                StreamMapping(
                    function=function,
                    stream_arn=source,
                    batch_size=int(mapping.get("BatchSize", 100)),
                    filters=[
                        json.loads(f["Pattern"])
                        for f in (mapping.get("FilterCriteria") or {}).get("Filters", [])
                    ],
                    report_item_failures=report,
                    max_retries=int(mapping.get("MaximumRetryAttempts", -1)),
                    on_failure_arn=(mapping.get("DestinationConfig") or {})
                    .get("OnFailure", {})
                    .get("Destination"),
                )
            )
        elif ":sqs:" in source:
            queue_name = source.rsplit(":", 1)[1]
            queues.append(
                QueueMapping(
                    function=function,
                    queue_url=sqs.get_queue_url(QueueName=queue_name)["QueueUrl"],
                    batch_size=int(mapping.get("BatchSize", 10)),
                    report_item_failures=report,
                )
            )
    schedules = {}
    events = client("events", endpoint)
    for rule in events.list_rules()["Rules"]:
        for target in events.list_targets_by_rule(Rule=rule["Name"])["Targets"]:
            function = name_to_logical.get(target["Arn"])
            if function and rule.get("ScheduleExpression"):
                schedules[function] = rule["ScheduleExpression"]
    return StackInfo(
        endpoint=endpoint,
        functions=functions,
        stream_mappings=streams,
        queue_mappings=queues,
        routes=http_routes(template),
        schedules=schedules,
        outputs={
            k: v
            for k, v in physical.items()
            if k
            in {
                "JobsTable",
                *PRIORITY_QUEUE_OUTPUTS.values(),
                *QUEUE_SHARD_OUTPUTS,
                "DeadLetterQueue",
                "RelayFailureQueue",
                "DocumentsBucket",
                "DataBucket",
            }
        },
    )
