"""template.yaml → what the local stack needs: the translated CloudFormation and the HTTP routes.
There is no second list of resources: everything comes from the template."""

from __future__ import annotations

import copy
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

LOCAL_CODE_BUCKET = "leasehold-local-code"
LOCAL_CODE_KEY = "code.zip"


class TemplateError(RuntimeError):
    pass


@dataclass(frozen=True)
class Route:
    method: str
    path: str
    function: str
    needs_identity: bool

    def match(self, method: str, path: str) -> dict[str, str] | None:
        if method.upper() != self.method:
            return None
        pattern = "^" + re.sub(r"\\\{(\w+)\\\}", r"(?P<\1>[^/]+)", re.escape(self.path)) + "$"
        found = re.match(pattern, path)
        return found.groupdict() if found else None


_PARSED: dict[tuple[str, int, int], dict[str, Any]] = {}  # (path, mtime_ns, size) → template


def load_template(path: Path) -> dict[str, Any]:
    """The template as aws-sam-translator reads it (its CloudFormation tags as `Fn::…` maps),
    parsed with libyaml when PyYAML has it, and once per file version: `local up` reads it three
    times, and the pure-Python parser took a tenth of a second each. A copy every time."""
    if not path.is_file():
        raise TemplateError(f"template not found: {path}")
    stat = path.stat()
    key = (str(path.resolve()), stat.st_mtime_ns, stat.st_size)
    if key not in _PARSED:
        try:
            parsed = dict(_yaml_parse(path.read_text()))
        except Exception as exc:  # a YAML error of any kind is one clear line
            raise TemplateError(f"template {path} is not valid YAML: {exc}") from exc
        _PARSED.clear()  # one template at a time is what a process reads
        _PARSED[key] = parsed
    return copy.deepcopy(_PARSED[key])


def _yaml_parse(text: str) -> Any:
    """samtranslator.yaml_helper.yaml_parse with a loader class of our own (it adds its tag
    constructor to PyYAML's shared SafeLoader), libyaml's when present."""
    import yaml
    from samtranslator.yaml_helper import intrinsics_multi_constructor

    base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class Loader(base):  # type: ignore[misc, valid-type]
        pass

    Loader.add_multi_constructor("!", intrinsics_multi_constructor)
    return yaml.load(text, Loader=Loader)  # noqa: S506 - a SafeLoader with CloudFormation's tags


def http_routes(template: dict[str, Any]) -> list[Route]:
    """Every HttpApi event of every function, as the local gateway serves it."""
    routes = []
    for logical_id, resource in template.get("Resources", {}).items():
        if resource.get("Type") != "AWS::Serverless::Function":
            continue
        for event in (resource.get("Properties", {}).get("Events") or {}).values():
            if event.get("Type") != "HttpApi":
                continue
            props = event.get("Properties", {})
            auth = (props.get("Auth") or {}).get("Authorizer")
            routes.append(
                Route(
                    method=str(props["Method"]).upper(),
                    path=str(props["Path"]),
                    function=logical_id,
                    needs_identity=auth != "NONE",
                )
            )
    # Literal paths before parameterised ones, as API Gateway's most-specific match does.
    return sorted(routes, key=lambda r: (r.path.count("{"), -len(r.path)))


CACHE_KEEP = 32
"""Translations kept in the cache directory (the newest; a test run makes a few variants)."""


def cache_dir() -> Path:
    """Where translations are kept: `$LEASEHOLD_CACHE`, else `$XDG_CACHE_HOME/leasehold`, else
    `~/.cache/leasehold`."""
    explicit = os.environ.get("LEASEHOLD_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "leasehold"


def translate(template: dict[str, Any], region: str) -> dict[str, Any]:
    """SAM → CloudFormation with aws-sam-translator, code pointed at a placeholder S3 object.

    The translation depends only on the template, the region and the translator's version, and
    costs 2-3 CPU-seconds (importing aws-sam-translator is half of it) on every `local up`. So it
    is kept in `cache_dir()` under the SHA-256 of those three and read back when they are the
    same (decision CI15). A cache that cannot be read or written is only slower."""
    import hashlib
    import json
    from importlib.metadata import version

    canonical = json.dumps([template, region, version("aws-sam-translator")], sort_keys=True)
    path = cache_dir() / f"translated-{hashlib.sha256(canonical.encode()).hexdigest()[:32]}.json"
    try:
        cached = json.loads(path.read_text())
        if isinstance(cached, dict):
            os.utime(path)  # the newest are kept
            return cached
    except (OSError, ValueError):
        pass
    translated = _translate(template, region)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        partial.write_text(json.dumps(translated))
        os.replace(partial, path)  # whole or not at all, for a stack starting beside this one
        kept = sorted(path.parent.glob("translated-*.json"), key=_mtime, reverse=True)
        for old in kept[CACHE_KEEP:]:
            old.unlink(missing_ok=True)
    except OSError:
        pass
    return translated


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _translate(template: dict[str, Any], region: str) -> dict[str, Any]:
    from samtranslator.translator.transform import transform

    class _NoManagedPolicies:
        def load(self) -> dict[str, str]:
            return {}

    sam = copy.deepcopy(template)
    code = f"s3://{LOCAL_CODE_BUCKET}/{LOCAL_CODE_KEY}"
    sam.setdefault("Globals", {}).setdefault("Function", {})["CodeUri"] = code
    for resource in sam.get("Resources", {}).values():
        if resource.get("Type") == "AWS::Serverless::Function":
            resource.setdefault("Properties", {}).pop("CodeUri", None)
    os.environ.setdefault("AWS_DEFAULT_REGION", region)
    return dict(transform(sam, {"AWS::Region": region}, _NoManagedPolicies()))
