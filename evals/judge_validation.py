"""Every LLM judge's validation on BEIR qrels (SciFact train by default): per query its qrels positives, BM25 hard
negatives and a random negative; queries are shuffled with a fixed seed and split into two halves of
`queries_per_split`. The judge is validated on the second half; the first is left out of the judge-vs-qrels figures
on the run's contexts (`left_out_query_ids`), as it was when an offline judge was fitted on it."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from lumina_assets.core.schemas import Context
from lumina_assets.corpus.collections import load_beir


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


SEED = 13  # the shuffle that splits queries into the two halves (fixed, so validation pairs never change)
PAIRS_NOTE = "per query: its qrels positives, 2 BM25 hard negatives and 1 random negative; queries split in two halves, the second validates"


def left_out_query_ids(folder: Path, *, queries_per_split: int) -> set[str]:
    """The query ids of `labelled_pairs`'s first half (same selection), left out of the judge-vs-qrels figures."""
    collection = load_beir(folder, "train")
    ids = sorted(q for q in collection.qrels if q in collection.queries)
    random.Random(SEED).shuffle(ids)
    return set(ids[:queries_per_split])


HARD_NEGATIVES = 2  # per query, besides one random negative


def labelled_pairs(folder: Path, *, queries_per_split: int) -> tuple[list[LabelledPair], list[LabelledPair]]:
    """(first half, validation half) pairs from BEIR qrels, split by query: qrels positives, BM25 hard negatives (top docs
    outside the qrels) and random docs. Both halves draw from one seeded generator, so the first half is built
    even where only the second is used: that keeps the validation pairs the same."""
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
