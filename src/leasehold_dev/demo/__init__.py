"""`make demo` (`leasehold demo`): everything leasehold is for, on the embedded local stack (moto),
told as stories in time order and checked. See `main` for the phases and the table."""

from leasehold_dev.demo.main import run_demo

__all__ = ["run_demo"]
