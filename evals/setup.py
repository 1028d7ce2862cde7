"""What a benchmark step needs before it can run: the corpus tables, the judge and its agreement with qrels.
Resources are duck-typed, so this module never imports Dagster; a step that cannot run raises `SetupError`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from evals import defaults, ledger
from evals import judge as judge_lib
from evals import judge_calibration as calibration
from lumina_assets.core import settings, tables
from lumina_assets.corpus.collections import is_beir_queries


class SetupError(RuntimeError):
    """A benchmark step cannot run here; the message says what to do."""


def load_passages() -> pl.DataFrame | None:
    """Every ingest batch's passages, or None when the table was never built."""
    return tables.read_all(tables.PASSAGES)


def load_papers() -> pl.DataFrame | None:
    return tables.read(tables.PAPERS)


def calibration_dir(config_value: str) -> Path:
    """The offline judge's calibration set: the configured folder, LUMINA_CORPUS when SciFact, else the shared one."""
    if config_value:
        return Path(config_value)
    corpus = settings.get().paths.corpus
    if corpus is not None and corpus.name == "scifact" and is_beir_queries(corpus):
        return corpus
    return settings.shared_data_dir() / "scifact"


def offline_judge(folder: Path, queries_per_split: int) -> judge_lib.OfflineJudge:
    """The calibrated offline judge; thresholds and their held-out agreement are cached as JSON."""
    if not (folder / "qrels").is_dir():
        shipped = calibration.packaged_thresholds(queries_per_split)
        if shipped is None:
            raise SetupError(
                f"offline judge needs SciFact train qrels for calibration at {folder} (no shipped calibration for "
                f"{queries_per_split} queries per split); set JudgeConfig.calibration_dir or "
                "run `lumina fetch-collection scifact`"
            )
        return judge_lib.OfflineJudge(calibration.default_embedder(), shipped)
    embedder = calibration.default_embedder()
    cache = settings.benchmark_dir() / "judge_calibration"
    thresholds = calibration.load_or_calibrate(embedder, folder, queries_per_split, cache)
    return judge_lib.OfflineJudge(embedder, thresholds)


def build_judge(judge_llm, config):
    """(judge, llm client or None): without a key, the calibrated offline judge."""
    client = judge_llm.get_client()
    if client.is_offline:
        return offline_judge(calibration_dir(config.calibration_dir), config.calibration_queries), None
    attempts = getattr(config, "max_attempts", defaults.JUDGE_MAX_ATTEMPTS)
    return judge_lib.LLMJudge(client, max_attempts=attempts), client


def judge_agreement(
    judge_llm, config, *, llm_queries: int = defaults.LLM_VALIDATION_QUERIES
) -> dict[str, Any]:
    """Agreement of the configured judge with SciFact human qrels on held-out pairs ({} without the qrels); an LLM
    judge is validated on `llm_queries` queries. `config` as for build_judge."""
    folder = calibration_dir(config.calibration_dir)
    if not (folder / "qrels").is_dir():
        return {}
    judge, client = build_judge(judge_llm, config)
    if judge.is_offline and judge.thresholds.validation:
        result = dict(judge.thresholds.validation)
    else:
        _, validation = calibration.labelled_pairs(folder, queries_per_split=config.calibration_queries)
        if client is not None:
            keep = sorted({p.query_id for p in validation})[:llm_queries]
            validation = [p for p in validation if p.query_id in keep]
        result = calibration.validate_judge(judge, validation)
        ledger.record_cost("judge_validation", None, client)
    result["set"] = f"{folder.name} train qrels"
    result["offline"] = judge.is_offline
    if judge.is_offline:
        shown = ("relevance", "precision", "calibrated_on", "calibration_kappa")
        result["thresholds"] = {name: getattr(judge.thresholds, name) for name in shown}
    return result


def calibration_question_ids(config) -> set[str]:
    """Benchmark question ids of the offline judge's calibration queries, left out of its validation on contexts."""
    folder = calibration_dir(config.calibration_dir)
    if not (folder / "qrels" / "train.tsv").exists():
        return set()
    ids = calibration.calibration_query_ids(folder, queries_per_split=config.calibration_queries)
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
