"""The applications that ship with leasehold, each on the engine's public API alone
(`from leasehold import …`): `synthetic` (demos, tests, benchmarks), `reading_list` (bookmarks
whose titles and summaries come from background jobs) and `doc_agent` (the bounded
document-preparation agent). Name them in `LEASEHOLD_KINDS` to deploy them."""
