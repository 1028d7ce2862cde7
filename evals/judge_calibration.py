"""The offline judge's calibration and every judge's validation on BEIR qrels (SciFact train by default): qrels
positives, BM25 hard negatives and a random negative per query, split into a calibration half (fits the two cosine
thresholds) and a held-out half (agreement). Shipped calibrations live in evals/calibration/."""

from __future__ import annotations

import functools
import hashlib
import random
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from evals.judge import OfflineJudge, OfflineThresholds
from lumina_assets.core.schemas import Context
from lumina_assets.corpus.collections import load_beir
from lumina_assets.parsing.sentences import split_sentences


@dataclass
class LabelledPair:
    query_id: str
    query: str
    doc_id: str
    title: str
    text: str
    label: int

    def as_context(self) -> Context:
        return Context(title=self.title, chunks=[self.text], paper_id=self.doc_id)


SEED = 13  # the shuffle that splits queries into calibration and validation
MODEL = "all-MiniLM-L6-v2"  # the offline judge's embedding model (`default_embedder`)
PAIRS_NOTE = "per query: its qrels positives, 2 BM25 hard negatives and 1 random negative; queries split calibration/validation"


def calibration_query_ids(folder: Path, *, queries_per_split: int) -> set[str]:
    """The query ids `labelled_pairs` calibrates on (same selection), so nothing validates the judge on them."""
    collection = load_beir(folder, "train")
    ids = sorted(q for q in collection.qrels if q in collection.queries)
    random.Random(SEED).shuffle(ids)
    return set(ids[:queries_per_split])


HARD_NEGATIVES = 2  # per query, besides one random negative


def labelled_pairs(folder: Path, *, queries_per_split: int) -> tuple[list[LabelledPair], list[LabelledPair]]:
    """(calibration, validation) pairs from BEIR qrels, split by query: qrels positives, BM25 hard negatives (top docs
    outside the qrels) and random docs."""
    from evals.lexical import LexicalIndex

    collection = load_beir(folder, "train")
    corpus, queries, qrels = collection.corpus, collection.queries, collection.qrels
    ids = sorted(q for q in qrels if q in queries)
    rng = random.Random(SEED)
    rng.shuffle(ids)
    chosen = ids[: 2 * queries_per_split]
    doc_ids = list(corpus)
    texts = [f"{corpus[d]['title']} {corpus[d]['text']}" for d in doc_ids]
    lexical = LexicalIndex(texts)
    splits: tuple[list[LabelledPair], list[LabelledPair]] = ([], [])
    for index, qid in enumerate(chosen):
        relevant = {d for d, r in qrels[qid].items() if r > 0 and d in corpus}
        top = [i for i, _ in lexical.search(queries[qid], HARD_NEGATIVES + 10)]
        negatives = [doc_ids[i] for i in top if doc_ids[i] not in relevant][:HARD_NEGATIVES]
        while len(negatives) < HARD_NEGATIVES + 1:
            candidate = doc_ids[rng.randrange(len(doc_ids))]
            if candidate not in relevant and candidate not in negatives:
                negatives.append(candidate)
        target = splits[0] if index < queries_per_split else splits[1]
        for doc, label in [(d, 1) for d in sorted(relevant)] + [(d, 0) for d in negatives]:
            target.append(
                LabelledPair(qid, queries[qid], doc, corpus[doc]["title"], corpus[doc]["text"], label)
            )
    return splits


def _best_threshold(scores: Sequence[float], labels: Sequence[int]) -> tuple[float, float]:
    """Threshold (midpoint between distinct sorted scores) with the highest Cohen's kappa, vectorized over cuts."""
    values = np.asarray(scores, dtype=float)
    truth = np.asarray(labels, dtype=int)
    distinct = np.unique(values)
    if distinct.size < 2:
        return float(distinct[0]) if distinct.size else 0.0, 0.0
    cuts = (distinct[:-1] + distinct[1:]) / 2
    order = np.argsort(values)
    sorted_values, sorted_truth = values[order], truth[order]
    n = values.size
    below = np.searchsorted(sorted_values, cuts, side="left")  # items predicted 0 at each cut
    positives_below = np.concatenate([[0], np.cumsum(sorted_truth)])[below]
    total_pos = int(truth.sum())
    tp = total_pos - positives_below
    predicted_pos = n - below
    fp = predicted_pos - tp
    fn = positives_below
    tn = n - tp - fp - fn
    observed = (tp + tn) / n
    p_yes, h_yes = predicted_pos / n, total_pos / n
    expected = p_yes * h_yes + (1 - p_yes) * (1 - h_yes)
    with np.errstate(divide="ignore", invalid="ignore"):
        kappa = np.where(expected < 1, (observed - expected) / (1 - expected), 0.0)
    best = int(np.nanargmax(kappa))
    return float(cuts[best]), float(kappa[best])


def calibrate_offline_judge(
    embedder, folder: Path, *, queries_per_split: int
) -> tuple[OfflineThresholds, list[LabelledPair]]:
    """Fit the offline judge's two thresholds on the calibration half; return them and the validation pairs. CR's
    from document-level qrels; CP's from weak sentence labels (a relevant document's best-matching sentence is
    positive, every sentence of a non-relevant one negative), as BEIR qrels carry no sentence labels."""
    calibration, validation = labelled_pairs(folder, queries_per_split=queries_per_split)
    judge = OfflineJudge(embedder, OfflineThresholds(0.0, 0.0, MODEL, "", 0, 0.0))
    pairs = [(p.query, p.as_context()) for p in calibration]
    scores = judge.relevance_scores(pairs)
    cr_threshold, cr_kappa = _best_threshold(scores, [p.label for p in calibration])
    sentence_lists = [split_sentences(pair.text) for pair in calibration]
    judge._encode([s for sentences in sentence_lists for s in sentences])  # one batched encode
    sentence_scores: list[float] = []
    sentence_labels: list[int] = []
    for pair, sentences in zip(calibration, sentence_lists, strict=True):
        if not sentences:
            continue
        query_vector = judge._vectors[pair.query]
        sims = [float(np.dot(query_vector, judge._vectors[s])) for s in sentences]
        if pair.label:
            sentence_scores.append(max(sims))
            sentence_labels.append(1)
        else:
            sentence_scores += sims
            sentence_labels += [0] * len(sims)
    cp_threshold, _ = _best_threshold(sentence_scores, sentence_labels)
    thresholds = OfflineThresholds(
        relevance=cr_threshold,
        precision=cp_threshold,
        model=MODEL,
        calibrated_on=f"{folder.name} train qrels ({queries_per_split} calibration queries, seed {SEED})",
        calibration_pairs=len(calibration),
        calibration_kappa=cr_kappa,
    )
    return thresholds, validation


def validate_judge(judge, pairs: Sequence[LabelledPair]) -> dict[str, Any]:
    """The judge's CR verdicts against human qrels on held-out pairs: kappa, precision, recall, failures."""
    from evals.metrics import agreement

    verdicts = judge.relevance_verdicts([(p.query, p.as_context()) for p in pairs])
    kept = [(v, p.label) for v, p in zip(verdicts, pairs, strict=True) if v is not None]
    result = agreement([v for v, _ in kept], [h for _, h in kept])
    return {
        "judge": judge.name,
        **asdict(result),
        "failures": len(pairs) - len(kept),
        "queries": len({p.query_id for p in pairs}),
        "pairs_note": PAIRS_NOTE,
        "summary": result.fmt(),
    }


@functools.lru_cache(maxsize=1)
def default_embedder():
    """The project's shared all-MiniLM-L6-v2 embedder, in fp32 on every machine: the shipped thresholds were
    calibrated on fp32 vectors, and a judge must not change with the CPU it runs on."""
    from lumina_assets.indexing.embedding import Embedder

    return Embedder(form="fp32")


CALIBRATION_VERSION = "offline-judge-v2"  # v2: hard negatives from the project's BM25 (evals.lexical)
PACKAGED_CALIBRATIONS = Path(__file__).parent / "calibration"


def calibration_fingerprint(folder: Path, queries_per_split: int) -> str:
    """Identifies a calibration: the exact qrels / queries / corpus files, the split size, seed and model."""
    digest = hashlib.sha256(f"{CALIBRATION_VERSION}|{queries_per_split}|{SEED}|{MODEL}".encode())
    for name in ("qrels/train.tsv", "queries.jsonl", "corpus.jsonl"):
        digest.update((folder / name).read_bytes())
    return digest.hexdigest()[:24]


def packaged_thresholds(queries_per_split: int) -> OfflineThresholds | None:
    """The calibration shipped in evals/calibration/ for this split size and model, so a machine without the SciFact
    files still judges; None when no shipped one fits."""
    for path in sorted(PACKAGED_CALIBRATIONS.glob("offline_judge_*.json")):
        thresholds = OfflineThresholds.from_json(path.read_text(encoding="utf-8"))
        if thresholds.model == MODEL and thresholds.validation.get("queries") == queries_per_split:
            return thresholds
    return None


def load_or_calibrate(embedder, folder: Path, queries_per_split: int, cache_dir: Path) -> OfflineThresholds:
    """Thresholds for this exact calibration set: from the run cache, else shipped in evals/calibration/, else
    fitted now with their held-out agreement stored beside them."""
    fingerprint = calibration_fingerprint(folder, queries_per_split)
    for candidate in (
        cache_dir / f"{fingerprint}.json",
        PACKAGED_CALIBRATIONS / f"offline_judge_{fingerprint}.json",
    ):
        if candidate.exists():
            return OfflineThresholds.from_json(candidate.read_text(encoding="utf-8"))
    thresholds, validation = calibrate_offline_judge(embedder, folder, queries_per_split=queries_per_split)
    thresholds.validation = validate_judge(OfflineJudge(embedder, thresholds), validation)
    thresholds.validation["fingerprint"] = fingerprint
    cache_dir.mkdir(parents=True, exist_ok=True)
    (cache_dir / f"{fingerprint}.json").write_text(thresholds.to_json(), encoding="utf-8")
    return thresholds
