"""The applications the tests load read their settings when imported, as a function's cold
start does; the test process is given the one they require (the documents agent's bucket: the
one `create_documents_bucket` makes in moto), before any test module imports them."""

import os

from leasehold_dev.local.resources import DOCUMENTS_BUCKET

os.environ.setdefault("DOCUMENTS_BUCKET", DOCUMENTS_BUCKET)
