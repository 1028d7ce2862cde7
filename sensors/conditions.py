"""The automation conditions of the partitioned parse assets (the others use plain `AutomationCondition.eager()`)."""

from __future__ import annotations

import dagster as dg

# every new batch rewrites the unpartitioned `papers`: ignoring it, a batch's steps follow their own partition only
ON_NEW_BATCH = dg.AutomationCondition.eager().ignore(dg.AssetSelection.assets("papers"))

# pdf_files waits for `papers` to write the batch: the inbox sensor adds the partition before the ingest run fills it
ON_BATCH_WRITTEN = (
    dg.AutomationCondition.missing()
    & dg.AutomationCondition.any_deps_updated().since_last_handled()
    & ~dg.AutomationCondition.any_deps_in_progress()
    & ~dg.AutomationCondition.in_progress()
)
