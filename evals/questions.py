"""Benchmark questions: synthetic ones from sampled passages (natural qrels: their source passage and paper), user
query files (JSONL / CSV / text) and BEIR query sets with their qrels. Every row says how it was made."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path
from typing import Any

import polars as pl

from evals.defaults import JUDGE_MAX_ATTEMPTS
from evals.judge import ask_with_retries, parse_tag
from lumina_assets.core.ids import paper_id_for, short_hash
from lumina_assets.corpus import splits
from lumina_assets.corpus.collections import (
    DEFAULT_SPLIT_ORDER,
    is_beir_queries,
    pick_split,
    qrels_path,
    read_qrels,
    read_queries,
)
from lumina_assets.parsing.sentences import split_sentences

QUESTION_SCHEMA = {
    "question_id": pl.String,
    "text": pl.String,
    "kind": pl.String,  # synthetic | user | beir
    "generator": pl.String,  # llm:<backend:model> | offline:template | <file name> | beir:<set>
    "set_name": pl.String,
    "source_passage_id": pl.String,
    "source_paper_id": pl.String,
    "source_text": pl.String,
    "relevant_paper_ids": pl.List(pl.String),
    # BEIR questions: where they come from and whether Lumina may have been tuned on them (lumina_assets.corpus.splits)
    "held_out": pl.Boolean,
    "beir_folder": pl.String,
    "beir_split": pl.String,
    "beir_query_id": pl.String,
}

QUESTION_PROMPT = """You are helping build a benchmark for an academic search engine.

Read the passage from a scientific paper below and write ONE question that a researcher might type into a literature search engine and that this passage answers. The question must be self-contained, specific (use the passage's concepts, methods, populations or values), must not mention "the passage", "this study" or "the authors", and must not copy a whole sentence from the passage.

Paper title: {title}
Passage: {passage}

Answer with the question only, wrapped in tags: <question>your question</question>"""

_CONTENT_WORD = re.compile(r"[A-Za-z][A-Za-z0-9\-]{3,}")


def questions_frame(rows: list[dict[str, Any]]) -> pl.DataFrame:
    return pl.DataFrame([{k: r.get(k) for k in QUESTION_SCHEMA} for r in rows], schema=QUESTION_SCHEMA)


def sample_passages(passages: pl.DataFrame, n: int, *, seed: int = 7) -> pl.DataFrame:
    """A deterministic sample (by hash of seed + passage id) of passages of 40 words or more to ask a question about."""
    if passages is None or passages.height == 0 or n <= 0:
        return passages.head(0) if passages is not None else pl.DataFrame()
    frame = passages.filter(pl.col("text").str.split(" ").list.len() >= 40)
    if "kind" in frame.columns:
        frame = frame.filter(pl.col("kind").is_in(["abstract", "text"]) | pl.col("kind").is_null())
    ranked = frame.with_columns(
        pl.col("passage_id")
        .map_elements(lambda pid: short_hash(str(seed), pid), return_dtype=pl.String)
        .alias("_rank")
    )
    return ranked.sort("_rank").head(n).drop("_rank")


_HEADER = re.compile(r"^(?:[A-Z][A-Z&/ ]{3,}:?\s+)+")  # structured-abstract headings: "APPROACH AND RESULTS"
_LEAD_IN = re.compile(
    r"^(?:however|therefore|thus|moreover|furthermore|in addition|additionally|finally|overall|importantly|"
    r"in conclusion|taken together|collectively|here|in this study|in this work|"
    r"(?:we|our (?:results|data|findings)|these (?:results|data|findings)|this study) "
    r"(?:found|show|showed|demonstrate|demonstrated|suggest|suggested|indicate|indicated|report|reveal|revealed)"
    r"(?: that)?)[,:]?\s+",
    re.IGNORECASE,
)
_FINDING = re.compile(
    r"\b(?:increase[sd]?|decrease[sd]?|reduce[sd]?|associated|correlat\w+|improve[sd]?|inhibit\w*|induce[sd]?|"
    r"promote[sd]?|require[sd]?|predict\w*|higher|lower|risk|significant\w*|mediat\w+|caus\w+|prevent\w*)\b",
    re.IGNORECASE,
)
_WEAK_START = re.compile(
    r"^(?:we|to|in this review|this review|here we|the aim|the purpose|our aim)\b", re.IGNORECASE
)


def _clean_claim(sentence: str) -> str:
    text = _HEADER.sub("", sentence.strip())
    previous = None
    while previous != text:
        previous, text = text, _LEAD_IN.sub("", text)
    return text.strip().rstrip(" .;:")


def offline_question(passage_text: str, title: str = "") -> str:
    """A template question from the passage's most finding-like sentence: "What evidence is there that <claim>?",
    headings and lead-ins stripped, aims avoided, the sentence never cut."""
    candidates = []
    for sentence in split_sentences(passage_text):
        claim = _clean_claim(sentence)
        words = claim.split()
        if not 6 <= len(words) <= 32:
            continue
        score = (
            len(_CONTENT_WORD.findall(claim))
            + 6 * len(_FINDING.findall(claim))
            - 20 * bool(_WEAK_START.match(claim))
        )
        candidates.append((score, -len(words), claim))
    if not candidates:
        return f"What is known about {title.strip().rstrip('.')}?" if title.strip() else ""
    claim = max(candidates)[2]
    first = claim.split()[0]
    if not (
        len(first) > 1
        and (first.isupper() or any(c.isdigit() for c in first) or first[1:] != first[1:].lower())
    ):
        claim = claim[:1].lower() + claim[1:]
    return "What evidence is there that " + claim + "?"


QUESTION_MAX_TOKENS = 300


def _titles(papers: pl.DataFrame | None) -> dict[str, str]:
    if papers is None or not papers.height or "title" not in papers.columns:
        return {}
    return dict(zip(papers["paper_id"].to_list(), papers["title"].fill_null("").to_list(), strict=True))


def question_prompt(title: str, passage_text: str) -> str:
    return QUESTION_PROMPT.replace("{title}", title).replace("{passage}", passage_text)


def question_prompts(
    passages: pl.DataFrame, papers: pl.DataFrame | None, *, n: int, seed: int = 7
) -> list[str]:
    """The first-attempt prompts `synthetic_questions` sends for these passages (what a batch submits)."""
    titles = _titles(papers)
    return [
        question_prompt(titles.get(p["paper_id"], ""), p["text"])
        for p in sample_passages(passages, n, seed=seed).iter_rows(named=True)
    ]


def synthetic_questions(
    passages: pl.DataFrame,
    papers: pl.DataFrame | None,
    *,
    n: int,
    seed: int = 7,
    llm_client=None,
) -> tuple[pl.DataFrame, list[dict[str, str]]]:
    """(questions, failures). With an online `llm_client` the question comes from the LLM, else from the template."""
    titles = _titles(papers)
    online = llm_client is not None and not llm_client.is_offline
    generator = f"llm:{llm_client.label}" if online else "offline:template"
    rows, failures = [], []
    for passage in sample_passages(passages, n, seed=seed).iter_rows(named=True):
        title = titles.get(passage["paper_id"], "")
        text, problem = None, "no sentence to build a question from"
        if online:
            text, problem, _ = ask_with_retries(
                llm_client,
                question_prompt(title, passage["text"]),
                lambda answer: parse_tag(answer, "question"),
                JUDGE_MAX_ATTEMPTS,
                "answer with <question>...</question> only",
                max_tokens=QUESTION_MAX_TOKENS,
            )
        else:
            text = offline_question(passage["text"], title) or None
        if text is None:
            failures.append({"passage_id": passage["passage_id"], "reason": problem})
            continue
        rows.append(
            {
                "question_id": "syn-" + short_hash(passage["passage_id"], generator, length=12),
                "text": text,
                "kind": "synthetic",
                "generator": generator,
                "set_name": "synthetic",
                "source_passage_id": passage["passage_id"],
                "source_paper_id": passage["paper_id"],
                "source_text": passage["text"],
                "relevant_paper_ids": [passage["paper_id"]],
            }
        )
    return questions_frame(rows), failures


def _query_from_record(record: dict[str, Any]) -> str | None:
    for key in ("query", "question", "text", "q", "Query", "Question"):
        value = record.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def load_user_queries(path: Path) -> pl.DataFrame:
    """Queries from .jsonl (field query/question/text), .csv (same columns, or the first column) or .txt (one a
    line, e.g. a SciSpace-style export). Duplicates collapse onto one deterministic id."""
    path = Path(path)
    texts: list[str] = []
    if path.suffix.lower() in {".jsonl", ".ndjson"}:
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                record = json.loads(line)
                query = _query_from_record(record) if isinstance(record, dict) else str(record)
                if query:
                    texts.append(query)
    elif path.suffix.lower() == ".csv":
        with open(path, encoding="utf-8", newline="") as handle:
            reader = csv.DictReader(handle)
            for record in reader:
                query = _query_from_record(record) or (next(iter(record.values()), "") or "").strip()
                if query:
                    texts.append(query)
    else:
        texts = [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    rows = [
        {
            "question_id": "user-" + short_hash(text, length=12),
            "text": text,
            "kind": "user",
            "generator": path.name,
            "set_name": path.stem,
            "relevant_paper_ids": [],
        }
        for text in dict.fromkeys(texts)
    ]
    return questions_frame(rows)


def load_beir_queries(
    folder: Path,
    *,
    n: int,
    seed: int = 11,
    split: str = "",
    paper_ids: dict[str, str] | None = None,
    subset: str = splits.HELD_OUT,
) -> pl.DataFrame:
    """The BEIR queries that have qrels, with their relevant paper ids: all (n <= 0) or a seeded sample of n.
    `split` is a name or a comma-separated order (the first present); a train split is cut by `subset`
    (`lumina_assets.corpus.splits`), the held-out half by default. `paper_ids` maps BEIR doc id -> paper id
    (default `beir-<set>:<doc id>`)."""
    folder = Path(folder)
    split = pick_split(folder, split or DEFAULT_SPLIT_ORDER)
    queries, qrels = read_queries(folder), read_qrels(qrels_path(folder, split))
    corpus = f"beir-{folder.name}"
    judged = [q for q in qrels if q in queries and any(r > 0 for r in qrels[q].values())]
    chosen, held_out = splits.select(judged, split, subset)
    ids = sorted(chosen, key=lambda q: short_hash(str(seed), q))
    if n > 0:
        ids = ids[:n]
    label = splits.describe(split, subset)
    rows = []
    for qid in ids:
        relevant = [d for d, r in sorted(qrels[qid].items()) if r > 0]
        mapped = [(paper_ids or {}).get(d) or paper_id_for(corpus=corpus, corpus_doc_id=d) for d in relevant]
        rows.append(
            {
                "question_id": f"{corpus}-q:{qid}",
                "text": queries[qid],
                "kind": "beir",
                "generator": f"beir:{folder.name}/{label}",
                "set_name": f"{folder.name}-{label}",
                "relevant_paper_ids": mapped,
                "held_out": held_out,
                "beir_folder": str(folder),
                "beir_split": split,
                "beir_query_id": qid,
            }
        )
    return questions_frame(rows)


def beir_paper_ids(papers: pl.DataFrame | None) -> dict[str, str] | None:
    """BEIR doc id -> our paper id, from the papers table's BEIR rows (None when there are none)."""
    if papers is None or not {"source", "source_id"} <= set(papers.columns):
        return None
    rows = papers.filter(pl.col("source") == "beir").select("source_id", "paper_id")
    return dict(zip(rows["source_id"].to_list(), rows["paper_id"].to_list(), strict=True)) or None


def merge_questions(frames: list[pl.DataFrame | None]) -> pl.DataFrame:
    """The frames concatenated, the first row of each question id kept."""
    present = [f for f in frames if f is not None]
    frame = pl.concat(present) if present else pl.DataFrame(schema=QUESTION_SCHEMA)
    return frame.unique("question_id", keep="first", maintain_order=True)


def catalogue_collections(papers: pl.DataFrame | None) -> list[str]:
    """The BEIR collections the papers table was loaded from (`scifact` for `beir-scifact:<doc id>` rows)."""
    if papers is None or not {"source", "paper_id"} <= set(papers.columns):
        return []
    ids = papers.filter(pl.col("source") == "beir")["paper_id"]
    return ids.str.extract(r"^beir-([^:]+):", 1).drop_nulls().unique().sort().to_list()


def find_beir_folder(
    configured: Path | None, papers: pl.DataFrame | None, candidates: list[Path]
) -> Path | None:
    """The folder of the benchmark's BEIR questions: the configured one when it is one, else a folder among
    `candidates` holding a collection the catalogue was loaded from."""
    if configured is not None:
        return configured if is_beir_queries(configured) else None
    names = set(catalogue_collections(papers))
    for folder in candidates:
        if folder.name in names and is_beir_queries(folder):
            return folder
    return None


def gather_user_queries(
    paths: list[Path],
    beir: Path | None,
    *,
    beir_queries: int,
    seed: int,
    split: str,
    papers: pl.DataFrame | None,
    subset: str = splits.HELD_OUT,
) -> pl.DataFrame:
    """Every user query file, plus the queries of a BEIR folder (all for `beir_queries` 0, a seeded sample when
    positive, none when negative), mapped onto the papers table's ids."""
    frames = [load_user_queries(path) for path in paths]
    if beir is not None and is_beir_queries(beir) and beir_queries >= 0:
        frames.append(
            load_beir_queries(
                beir, n=beir_queries, seed=seed, split=split, paper_ids=beir_paper_ids(papers), subset=subset
            )
        )
    return merge_questions(frames)
