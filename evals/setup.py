"""What a benchmark step needs before it can run: the corpus tables, the judge and its agreement with qrels.
Resources are duck-typed, so this module never imports Dagster; a step that cannot run raises `SetupError`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from evals import defaults, ledger
from evals import judge as judge_lib
from evals import judge_validation as validation_lib
from lumina_assets.core import settings, tables
from lumina_assets.corpus.collections import is_beir_queries


class SetupError(RuntimeError):
    """A benchmark step cannot run here; the message says what to do."""


def load_passages() -> pl.DataFrame | None:
    """Every ingest batch's passages, or None when the table was never built."""
    return tables.read_all(tables.PASSAGES)


def load_papers() -> pl.DataFrame | None:
    return tables.read(tables.PAPERS)


def validation_dir(config_value: str) -> Path:
    """The BEIR qrels an LLM judge is validated on: the configured folder, LUMINA_CORPUS when SciFact, else the
    shared one."""
    if config_value:
        return Path(config_value)
    corpus = settings.get().paths.corpus
    if corpus is not None and corpus.name == "scifact" and is_beir_queries(corpus):
        return corpus
    return settings.shared_data_dir() / "scifact"


def build_judge(judge_llm, config) -> tuple[judge_lib.LLMJudge | judge_lib.NoJudge, Any]:
    """(judge, llm client or None). Without a key, `NoJudge`: the only offline judge there was embedded with
    Lumina's own model, so offline runs judge nothing and compare on qrels alone."""
    client = judge_llm.get_client()
    if client.is_offline:
        return judge_lib.NoJudge(), None
    attempts = getattr(config, "max_attempts", defaults.JUDGE_MAX_ATTEMPTS)
    return judge_lib.LLMJudge(client, max_attempts=attempts), client


def judge_agreement(
    judge_llm, config, *, llm_queries: int = defaults.LLM_VALIDATION_QUERIES
) -> dict[str, Any]:
    """Agreement of the configured LLM judge with SciFact human qrels on `llm_queries` queries of the validation
    half ({} without an LLM judge or without the qrels). `config` as for build_judge."""
    folder = validation_dir(config.calibration_dir)
    if not (folder / "qrels").is_dir():
        return {}
    judge, client = build_judge(judge_llm, config)
    if judge.is_offline:
        return {}
    _, validation = validation_lib.labelled_pairs(folder, queries_per_split=config.calibration_queries)
    keep = sorted({p.query_id for p in validation})[:llm_queries]
    result = validation_lib.validate_judge(judge, [p for p in validation if p.query_id in keep])
    ledger.record_cost("judge_validation", None, client)
    result["set"] = f"{folder.name} train qrels"
    result["offline"] = False
    return result


def left_out_question_ids(config) -> set[str]:
    """Benchmark question ids of the validation split's first half, left out of judge-vs-qrels on contexts."""
    folder = validation_dir(config.calibration_dir)
    if not (folder / "qrels" / "train.tsv").exists():
        return set()
    ids = validation_lib.left_out_query_ids(folder, queries_per_split=config.calibration_queries)
    return {f"beir-{folder.name}-q:{qid}" for qid in ids}


def _remembered_path() -> Path:
    return settings.benchmark_dir() / "beir_folder.txt"


def remember_beir_folder(folder: Path) -> None:
    """The BEIR folder the last questions came from, so a rerun without LUMINA_CORPUS finds it again."""
    path = _remembered_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(str(Path(folder).resolve()), encoding="utf-8")


def beir_folder_candidates() -> list[Path]:
    """Where a BEIR collection of the catalogue may be: the last one the benchmark read, then `data/collections/`."""
    candidates = []
    remembered = _remembered_path()
    if remembered.exists():
        candidates.append(Path(remembered.read_text(encoding="utf-8").strip()))
    root = settings.data_dir() / "collections"
    if root.is_dir():
        candidates += sorted(p for p in root.iterdir() if p.is_dir())
    return candidates
