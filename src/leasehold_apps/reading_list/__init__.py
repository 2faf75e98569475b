"""The reading list: bookmarks a tenant's members share, whose titles (and, on request,
summaries from a billable provider) come from background jobs. Built on leasehold's public API
alone (`from leasehold import …`); name it in `LEASEHOLD_KINDS` to deploy it.

- `title`, `enrich` (kinds.py, enrich.py): the job kinds, made only by the bookmarks API
  (never `POST /jobs`), their outcomes committed with the bookmark under its `source_version`;
- `reading_list_import`, `imported_title` (imports.py): a list of URLs imported as one parent
  job whose children fetch the titles and save the bookmarks (`POST /bookmark-imports`);
- `routes` (routes.py): the nine `/bookmarks…` routes, over `service.py` and `store.py` (the
  bookmark item's writes and codec.py's item shape);
- `titles/` (the title fetchers), `provider.py` (the billable provider's client), `settings.py`
  (TITLE_FETCHER, ENRICHMENT_PROVIDER_URL, ENRICHMENT_PROVIDER_CAPABILITY,
  LEASEHOLD_LOCAL_PROVIDERS)."""

from leasehold_apps.reading_list.enrich import enrich
from leasehold_apps.reading_list.imports import imported_title, importing
from leasehold_apps.reading_list.kinds import title
from leasehold_apps.reading_list.routes import routes

__all__ = ["enrich", "imported_title", "importing", "routes", "title"]
