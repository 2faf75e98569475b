"""`python -m leasehold_dev.scaffold` (make scaffold-template): rewrite the cookiecutter tree's
generated files (template.yaml, src/leasehold-requirements.txt) from this checkout's own."""

import sys

from leasehold_dev.scaffold import main

sys.exit(main())
