r"""Context Precision on human labels, and context length, with no LLM: a context sentence is critical when it is
one of the claim's rationale sentences, matched on text; sentences are the judge's units, so an LLM judge's
verdicts line up with the labels. Length is sentences and word tokens (`\w+` runs)."""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from rapidfuzz import fuzz

from evals.judge import context_sentences
from lumina_assets.core.schemas import Context

# rapidfuzz ratio of two normalized sentences that are the same sentence re-segmented
SENTENCE_THRESHOLD = 90.0
MIN_CONTAINED_CHARS = 30  # a piece of a rationale sentence this long counts (a snippet cut mid-sentence)
_TOKEN = re.compile(r"\w+")


# A run scores the same contexts at every page size and depth: sentences, normal forms and verdicts are cached. The
# scoring reads a slice of questions at a time and clears them after each (`clear_caches`), and the bounds keep any
# other caller's memory from growing with the number of questions.
@functools.lru_cache(maxsize=100_000)
def _norm(text: str) -> str:
    return " ".join(_TOKEN.findall(text.lower()))


@functools.lru_cache(maxsize=100_000)
def tokens(text: str) -> int:
    return len(_TOKEN.findall(text))


@functools.lru_cache(maxsize=20_000)
def _sentences(chunks: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(context_sentences(Context(title="", chunks=list(chunks))))


def sentences_of(context: Context) -> tuple[str, ...]:
    """The judge's sentences of a context (`evals.judge.context_sentences`), cached by its chunks."""
    return _sentences(tuple(context.chunks))


def load_rationales(folder: Path, split: str) -> dict[str, list[str]]:
    """query id -> the claim's rationale sentences over all its evidence abstracts ({} when the file is absent)."""
    from evals.pinpoint import load_rationales as rationale_pairs

    path = Path(folder) / f"rationales_{split}.jsonl"
    out: dict[str, list[str]] = {}
    for pair in rationale_pairs(path) if path.exists() else []:
        out.setdefault(pair.query_id, []).extend(s for s in pair.sentences if s)
    return out


@functools.lru_cache(maxsize=100_000)
def _is_rationale(sentence: str, rationales: tuple[str, ...]) -> bool:
    """The same sentence (re-segmented or re-spaced), or a long enough piece of one, or one containing one."""
    text = _norm(sentence)
    if not text:
        return False
    for rationale in rationales:
        other = _norm(rationale)
        if not other:
            continue
        if other in text or (len(text) >= MIN_CONTAINED_CHARS and text in other):
            return True
        if fuzz.ratio(text, other) >= SENTENCE_THRESHOLD:
            return True
    return False


def clear_caches() -> None:
    """Empty the caches above: a slice of questions scored, its contexts are not asked about again."""
    for cached in (_norm, tokens, _sentences, _is_rationale):
        cached.cache_clear()


def sentence_labels(context: Context, rationales: Sequence[str]) -> list[int]:
    """1 for each critical (rationale) sentence of the context, 0 otherwise, in the judge's sentence order."""
    frozen = tuple(rationales)
    return [int(_is_rationale(s, frozen)) for s in sentences_of(context)]


def human_cp(contexts: Sequence[Context], rationales: Sequence[str]) -> float:
    """CP_j with human labels: mean over contexts of critical / sentences; 0.0 for no contexts (counted)."""
    if not contexts:
        return 0.0
    ratios = []
    for context in contexts:
        labels = sentence_labels(context, rationales)
        ratios.append(sum(labels) / len(labels) if labels else 0.0)
    return sum(ratios) / len(ratios)


def length(contexts: Sequence[Context]) -> tuple[float | None, float | None]:
    """(mean sentences per context, mean word tokens per context); None for no contexts."""
    if not contexts:
        return None, None
    sentences = [len(sentences_of(c)) for c in contexts]
    words = [sum(tokens(chunk) for chunk in c.chunks) for c in contexts]
    return sum(sentences) / len(sentences), sum(words) / len(words)


def sentence_agreement(pairs: Sequence[tuple[Sequence[int], Sequence[int]]]) -> dict[str, float | int] | None:
    """Cohen's kappa of the judge's sentence verdicts against the human labels over (verdicts, labels) pairs;
    pairs of different lengths are skipped and counted."""
    from evals.metrics import agreement

    judge: list[int] = []
    human: list[int] = []
    skipped = 0
    for verdicts, labels in pairs:
        if len(verdicts) != len(labels):
            skipped += 1
            continue
        judge += [int(v) for v in verdicts]
        human += [int(h) for h in labels]
    if not judge:
        return None
    result = agreement(judge, human)
    return {
        "kappa": result.kappa,
        "sentences": result.n,
        "critical_by_humans": result.positives,
        "precision": result.precision,
        "recall": result.recall,
        "contexts_skipped": skipped,
    }


def rationales_for_questions(
    folder: Path | None, split: str | None, question_ids: Mapping[str, str]
) -> dict[str, list[str]]:
    """Question id -> its claim's rationale sentences (`question_ids`: question id -> BEIR query id)."""
    if folder is None or not split:
        return {}
    by_query = load_rationales(folder, split)
    return {qid: by_query[query] for qid, query in question_ids.items() if query in by_query}
