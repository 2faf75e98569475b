"""The boto3 sessions a testbed makes: each new (its clients are new), all reading the service
models through one loader for the whole process."""

from __future__ import annotations

from typing import Any

import boto3

from leasehold.testing.mocking import REGION

_MODELS: list[Any] = []  # the botocore data loader every testbed of this process shares


class _SearchPaths(list[Any]):
    """A loader's search path to which a path already on it is not added again: boto3 appends
    its data directory to the loader of every session it makes, and a loader shared by every
    session would grow by an entry a session (each lookup not yet cached walks it all)."""

    def append(self, path: Any) -> None:
        if path not in self:
            super().append(path)


def new_session() -> boto3.session.Session:
    """A new boto3 session (its clients are new) that reads the service models through one
    loader for the whole process: a session of its own read them from disk again, most of a
    testbed's setup when a suite makes one per test."""
    import botocore.loaders
    import botocore.session

    if not _MODELS:
        loader = botocore.loaders.create_loader()
        loader._search_paths = _SearchPaths(loader.search_paths)  # type: ignore[attr-defined]
        _MODELS.append(loader)
    core = botocore.session.get_session()
    core.register_component("data_loader", _MODELS[0])
    return boto3.session.Session(botocore_session=core, region_name=REGION)
