"""The test suite's view of template.yaml: see leasehold_dev.local.resources."""

from leasehold_dev.local.resources import (
    REGION,
    ROOT,
    TEMPLATE,
    clients,
    create_data_bucket,
    create_documents_bucket,
    create_queues,
    create_table,
    function_roles,
    relay_mapping,
    template,
    template_environment,
    worker_mapping,
)

__all__ = [
    "REGION",
    "ROOT",
    "TEMPLATE",
    "clients",
    "create_data_bucket",
    "create_documents_bucket",
    "create_queues",
    "create_table",
    "function_roles",
    "relay_mapping",
    "template",
    "template_environment",
    "worker_mapping",
]
