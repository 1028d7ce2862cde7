"""The automation conditions the partitioned parse assets declare (the others use plain
`AutomationCondition.eager()`); the automation sensor in `sensors/automation.py` evaluates them, so a new ingest
batch flows from `papers` to the index with no manual step."""

from __future__ import annotations

import dagster as dg

# `papers` is one unpartitioned table: every new batch rewrites it. Plain eager() would then re-run every
# batch's partition; ignoring it, a batch is fetched when its partition is added (newly missing) and later
# steps follow their own partition's upstream.
ON_NEW_BATCH = dg.AutomationCondition.eager().ignore(dg.AssetSelection.assets("papers"))

# pdf_files waits for `papers` to have written the batch: a new partition alone is not enough, since the
# inbox sensor adds the partition before the ingest run assigns papers to it.
ON_BATCH_WRITTEN = (
    dg.AutomationCondition.missing()
    & dg.AutomationCondition.any_deps_updated().since_last_handled()
    & ~dg.AutomationCondition.any_deps_in_progress()
    & ~dg.AutomationCondition.in_progress()
)
