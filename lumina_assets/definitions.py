"""The only place the Definitions object is built. Importing this module loads no model and opens no socket."""

from __future__ import annotations

import dagster as dg

from lumina_assets.defs import alerts, benchmark, citations, corpus, embedding_fanout
from lumina_assets.defs import indexing as index
from lumina_assets.defs import parsing as parse
from lumina_assets.defs.loggers import LOGGERS
from sensors import automation

_STAGES = (corpus, parse, citations, embedding_fanout, index, alerts, benchmark)


def build_definitions() -> dg.Definitions:
    assets: list = []
    checks: list = []
    resources: dict = {}
    for stage in _STAGES:
        assets += stage.ASSETS
        checks += stage.CHECKS
        resources.update(stage.build_resources())
    return dg.Definitions(
        assets=assets,
        asset_checks=checks,
        resources=resources,
        jobs=automation.JOBS,
        schedules=automation.SCHEDULES,
        sensors=automation.SENSORS,
        executor=automation.executor_from_env(),
        loggers=LOGGERS,
    )


defs = build_definitions()
