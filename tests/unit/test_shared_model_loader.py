"""One botocore data loader shared by many sessions (the test process's, and the public
testbed's): boto3 appends its own data directory to a session's loader each time it makes a
session, so a shared loader's search path must not grow by one entry a session (every lookup
not yet cached — a service's first client, an unknown name — walks the whole list)."""

from __future__ import annotations

import boto3
import pytest

from leasehold.testing import testbed


def test_the_testbed_s_sessions_share_a_loader_whose_search_path_stays_put() -> None:
    first = testbed._session()
    paths = list(first._session.get_component("data_loader").search_paths)
    for _ in range(20):
        later = testbed._session()
    loader = later._session.get_component("data_loader")
    assert loader is first._session.get_component("data_loader")
    assert loader.search_paths == paths
    assert len(set(paths)) == len(paths)


def test_the_test_process_s_sessions_share_a_loader_whose_search_path_stays_put() -> None:
    first = boto3.session.Session(region_name="us-east-1")
    loader = first._session.get_component("data_loader")
    paths = list(loader.search_paths)
    for _ in range(20):
        later = boto3.session.Session(region_name="us-east-1")
    assert later._session.get_component("data_loader") is loader  # conftest's one loader
    assert loader.search_paths == paths
    assert len(set(paths)) == len(paths)
    with pytest.raises(Exception, match="Unknown service"):
        later.client("no-such-service")
