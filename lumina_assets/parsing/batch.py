"""One ingest batch through the parser and the chunker: which papers need parsing again, the parse loop, and each
paper's passages, rebuilt only when its inputs changed. A bad PDF is a recorded failure, never a crashed run."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from lumina_assets.core.hygiene import clean_text, needs_cleaning
from lumina_assets.core.progress import Progress
from lumina_assets.core.sandbox import ALLOCATION_FAILED, Limits, run_limited
from lumina_assets.core.schemas import ParsedPaper

# Failures that depend on the environment (no GROBID server, a missing model), not on the file: retried next run.
RETRYABLE_REASONS = {"parser_unavailable", "grobid_error", "parser_error", "parser_crashed"}


def _valid_utf8(paper: ParsedPaper) -> ParsedPaper:
    """The parsed document with every string valid UTF-8 (a PDF /Title in broken UTF-16 gives lone
    surrogates, which the Parquet writer refuses)."""
    text = paper.to_json()
    return paper if not needs_cleaning(text) else ParsedPaper.from_json(clean_text(text))


def parse_one(parser, path: str, paper_id: str) -> tuple[ParsedPaper | None, str | None, str | None]:
    """(paper, reason, detail): a parser exception of any kind becomes a recorded failure."""
    from lumina_assets.parsing.base import ParseFailure

    try:
        return _valid_utf8(parser.parse(path, paper_id)), None, None
    except ParseFailure as exc:
        return None, exc.reason, exc.detail[:500]
    except Exception as exc:  # a parser bug must cost one paper, not the batch
        return None, "parser_error", f"{type(exc).__name__}: {str(exc)[:400]}"


def timed_parse(parser, path: str, paper_id: str):
    started = time.perf_counter()
    paper, reason, detail = parse_one(parser, path, paper_id)
    return paper, reason, detail, time.perf_counter() - started


def limited_parse(parser, path: str, paper_id: str, limits: Limits, peaks: list[float] | None = None):
    """timed_parse in a child process under `limits`: a bomb or a hung page is `time_limit` /
    `memory_limit` / `worker_crashed` for this paper, and this process never sees its memory. The child's
    peak resident memory (MB), when it lived to report it, is appended to `peaks`."""
    outcome = run_limited(parse_one, parser, path, paper_id, limits=limits)
    if peaks is not None and outcome.peak_rss_mb is not None:
        peaks.append(outcome.peak_rss_mb)
    if not outcome.ok:
        return None, outcome.reason, outcome.detail[:500], outcome.seconds
    paper, reason, detail = outcome.value
    if reason is not None and limits.memory_mb > 0 and ALLOCATION_FAILED.search(detail or ""):
        reason = "memory_limit"  # MuPDF's refused allocation, caught by the parser as a broken page
    return paper, reason, detail, outcome.seconds


def parse_all(
    parser,
    jobs: list[tuple[str, str]],
    workers: int,
    limits: Limits | None = None,
    progress: Progress | None = None,
) -> list:
    """(paper, reason, detail, seconds) per (path, paper_id) job, in order. With `limits`, every document is
    parsed in its own limited child process, `workers` at a time; without, in this process (tests, benches)."""

    def one(job: tuple[str, str]):
        outcome = (
            timed_parse(parser, *job) if limits is None else limited_parse(parser, job[0], job[1], limits)
        )
        if progress is not None:
            progress.advance()
        return outcome

    if limits is None or workers <= 1 or len(jobs) <= 1:
        return [one(job) for job in jobs]
    from concurrent.futures import ThreadPoolExecutor

    # Threads only wait on the children, which do the work; MuPDF is CPU-bound and holds the GIL.
    with ThreadPoolExecutor(max_workers=min(workers, len(jobs))) as pool:
        return list(pool.map(one, jobs))


# Failures that say the parser (or its environment) is broken, not the file: what the blocking check counts.
PARSER_FAILURE_REASONS = RETRYABLE_REASONS | {"worker_error"}
ALL_FAILED_MIN_DOCUMENTS = 3


def parser_failure_share(failures: dict[str, int], with_pdf: int) -> float:
    failed = sum(n for reason, n in failures.items() if reason in PARSER_FAILURE_REASONS)
    return failed / with_pdf if with_pdf else 0.0


def systemic_failure(
    failures: dict[str, int], with_pdf: int, *, threshold: float, min_documents: int
) -> str | None:
    """Why a batch's parse looks broken as a whole, or None. Bad files (encrypted, truncated, bombs over a
    limit) are the file's fault: recorded and skipped, they never hold the good papers of the batch back.
    A broken parser shows as every document failing, or as parser failures above `threshold`."""
    failed = sum(failures.values())
    if with_pdf >= ALL_FAILED_MIN_DOCUMENTS and failed == with_pdf:
        return f"all {with_pdf} PDFs failed to parse ({', '.join(sorted(failures))})"
    share = parser_failure_share(failures, with_pdf)
    if with_pdf >= min_documents and share > threshold:
        return f"{share:.0%} of {with_pdf} PDFs failed in the parser itself (threshold {threshold:.0%})"
    return None


@dataclass
class ParsedBatch:
    rows: list[dict[str, Any]] = field(default_factory=list)  # one parsed_papers row per file, in order
    parsed_now: int = 0
    reused: int = 0
    seconds: float = 0.0
    pages_now: int = 0
    sample: ParsedPaper | None = None  # the first paper parsed in this run


def parse_batch(
    files: Iterable[dict[str, Any]],
    previous: dict[str, dict[str, Any]],
    parser,
    *,
    workers: int = 1,
    limits: Limits | None = None,
    log_fn: Callable[[str], None] | None = None,
    progress_fn: Callable[[str], None] | None = None,
) -> ParsedBatch:
    """parsed_papers rows for a batch's pdf_files rows. A paper whose PDF and parser configuration are unchanged
    keeps its previous row (unless it failed for a retryable reason); the others are parsed, `workers` at a time."""
    from lumina_assets.parsing.base import parser_tag

    tag = parser_tag(parser)
    result = ParsedBatch()
    slots: list[dict[str, Any] | None] = []
    todo: list[tuple[int, dict[str, Any]]] = []
    for file in files:
        paper_id = file["paper_id"]
        if file["status"] != "ok":
            reason = "no_pdf" if file["status"] == "no_pdf" else f"pdf_{file['reason']}"
            slots.append({"paper_id": paper_id, "status": "no_pdf", "reason": reason, "parser": None})
            continue
        before = previous.get(paper_id)
        if (
            before is not None
            and before["sha256"] == file["sha256"]
            and before["parser_config"] == tag
            and before["reason"] not in RETRYABLE_REASONS
        ):
            slots.append(before)
            result.reused += 1
            continue
        todo.append((len(slots), file))
        slots.append(None)
    progress = Progress("parsing", len(todo), progress_fn, unit="PDFs") if progress_fn else None
    outcomes = parse_all(parser, [(f["path"], f["paper_id"]) for _, f in todo], workers, limits, progress)
    if progress is not None:
        progress.finish()
    for (slot, file), (paper, reason, detail, elapsed) in zip(todo, outcomes, strict=True):
        paper_id = file["paper_id"]
        result.seconds += elapsed
        result.parsed_now += 1
        row = {
            "paper_id": paper_id,
            "sha256": file["sha256"],
            "parser": tag,
            "parser_config": tag,
            "parse_seconds": round(elapsed, 4),
        }
        if paper is None:
            slots[slot] = {**row, "status": "failed", "reason": reason, "detail": detail}
            if log_fn:
                log_fn(f"{paper_id}: parse failed ({reason}: {detail})")
            continue
        result.pages_now += paper.page_count or 0
        result.sample = result.sample or paper
        slots[slot] = {
            **row,
            "parser": f"{paper.parser}@{parser.version}" if paper.parser != parser.name else tag,
            "status": "ok",
            "page_count": paper.page_count,
            "sections": len(paper.sections),
            "references": len(paper.references),
            "citations": len(paper.citations),
            "elements": len(paper.elements),
            "parsed_json": paper.to_json(),
        }
    result.rows = [row for row in slots if row is not None]
    return result


def passage_inputs_digest(paper: dict[str, Any], parsed_row: dict[str, Any] | None, settings_key: str) -> str:
    """What a paper's passages depend on: chunker settings, title, abstract, and the parse that produced them."""
    from lumina_assets.parsing.chunking import CHUNKER_VERSION

    parts = [
        f"chunker-{CHUNKER_VERSION}",
        settings_key,
        paper.get("title") or "",
        paper.get("abstract") or "",
        (parsed_row or {}).get("sha256") or "",
        (parsed_row or {}).get("parser") or "",
        (parsed_row or {}).get("status") or "",
    ]
    return hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()[:24]


def _paper_passages(
    paper: dict[str, Any], parsed_row: dict[str, Any] | None, count_tokens, max_tokens: int
) -> list[dict[str, Any]]:
    """A paper's passage rows: from the parsed document when parsing succeeded, else title + abstract."""
    from lumina_assets.parsing.chunking import passages_for_paper

    parsed = None
    if parsed_row is not None and parsed_row.get("status") == "ok" and parsed_row.get("parsed_json"):
        parsed = ParsedPaper.from_json(parsed_row["parsed_json"])
    passages = passages_for_paper(
        paper["paper_id"],
        title=paper.get("title"),
        abstract=paper.get("abstract"),
        parsed=parsed,
        count_tokens=count_tokens,
        max_tokens=max_tokens,
    )
    return [p.to_row() for p in passages if p.text.strip()]


@dataclass
class PassageBatch:
    rows: list[dict[str, Any]]
    state: dict[str, str]  # paper id -> inputs digest, for the next run
    rebuilt: int
    reused: int


def passages_for_batch(
    papers: Iterable[dict[str, Any]],
    parsed_rows: dict[str, dict[str, Any]],
    *,
    previous: pl.DataFrame | None,
    state: dict[str, str],
    settings_key: str,
    token_counter: Callable[[], Callable[[str], int]],
    max_tokens: int,
) -> PassageBatch:
    """A batch's passages: a paper whose inputs digest matches `state` keeps its previous passages, the others
    are chunked again (`token_counter()` is called once, only when something needs chunking)."""
    previous_by_paper = (
        {key[0]: group for key, group in previous.group_by("paper_id", maintain_order=True)}
        if previous is not None
        else {}
    )
    counter = None
    rows: list[dict[str, Any]] = []
    new_state: dict[str, str] = {}
    rebuilt = reused = 0
    for paper in papers:
        paper_id = paper["paper_id"]
        digest = passage_inputs_digest(paper, parsed_rows.get(paper_id), settings_key)
        new_state[paper_id] = digest
        if state.get(paper_id) == digest and paper_id in previous_by_paper:
            rows.extend(previous_by_paper[paper_id].to_dicts())
            reused += 1
            continue
        if counter is None:
            counter = token_counter()
        rows.extend(_paper_passages(paper, parsed_rows.get(paper_id), counter, max_tokens))
        rebuilt += 1
    return PassageBatch(rows, new_state, rebuilt, reused)
