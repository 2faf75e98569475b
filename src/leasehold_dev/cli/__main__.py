"""`python -m leasehold_dev.cli …`: the `leasehold` command."""

import sys

from leasehold_dev.cli.commands import main

sys.exit(main())
