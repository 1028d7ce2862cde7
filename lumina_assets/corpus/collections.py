"""Retrieval test collections for evaluation, BEIR layout (corpus.jsonl, queries.jsonl, qrels/<split>.tsv) or SMART
(CISI), read into plain dicts as beir does. This is the one BEIR reader: the local corpus loader, the judge's
calibration and the benchmark's questions read through `iter_corpus_records`, `read_queries` and `read_qrels`."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from lumina_assets.core.hygiene import clean_strings, usable_identifier, usable_text


@dataclass
class Collection:
    name: str
    corpus: dict[str, dict[str, str]]  # doc id -> {"title", "text", "authors"?}
    queries: dict[str, str]  # query id -> text
    qrels: dict[str, dict[str, int]]  # query id -> {doc id: relevance}
    source_files: list[Path] = field(default_factory=list)

    def fingerprint(self) -> str:
        """Hash of the corpus files' bytes: the eval index is reused exactly when the corpus is unchanged."""
        digest = hashlib.sha256()
        for path in sorted(self.source_files):
            digest.update(path.name.encode())
            with path.open("rb") as handle:
                for block in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(block)
        return digest.hexdigest()[:16]


class CollectionError(ValueError):
    """The directory is not a BEIR or SMART collection, or lacks the requested split."""


def load_collection(directory: str | Path, split: str = "test") -> Collection:
    """A BEIR directory, or a SMART-format one (*.ALL, *.QRY, *.REL) which is converted in memory."""
    root = Path(directory)
    if not root.is_dir():
        raise CollectionError(f"{root} is not a directory")
    if (root / "corpus.jsonl").exists():
        return load_beir(root, split)
    if list(root.glob("*.ALL")):
        return load_smart(root)
    raise CollectionError(f"{root} has neither corpus.jsonl (BEIR) nor a *.ALL file (SMART)")


def is_beir_corpus(path: Path | None) -> bool:
    """A BEIR corpus: a folder with corpus.jsonl."""
    return path is not None and Path(path).is_dir() and (Path(path) / "corpus.jsonl").is_file()


def is_beir_queries(path: Path | None) -> bool:
    """A BEIR query set: a folder with queries.jsonl and qrels/."""
    return path is not None and (Path(path) / "queries.jsonl").exists() and (Path(path) / "qrels").is_dir()


class RecordProblem(str):
    """Why a corpus.jsonl line was refused: the message, with a stable `reason` code for rejected_papers."""

    reason: str

    def __new__(cls, message: str, reason: str) -> RecordProblem:
        problem = super().__new__(cls, message)
        problem.reason = reason
        return problem


def check_corpus_record(record: object, number: int) -> tuple[dict | None, RecordProblem | None]:
    """A record with a usable string `_id` and string (or missing) title and text, every string valid UTF-8;
    or the problem. `_id: null`, a list title or a NaN text is refused, never stored as "None" / "['a']" / nan."""
    where = f"corpus.jsonl line {number}"
    if not isinstance(record, dict):
        return None, RecordProblem(f"{where}: not a JSON object", "invalid_record")
    doc_id = usable_identifier(record.get("_id"))
    if doc_id is None:
        what = "no _id" if "_id" not in record else f"unusable _id {repr(record['_id'])[:40]}"
        return None, RecordProblem(f"{where}: {what}", "unusable_id")
    cleaned: dict = {**record, "_id": doc_id}
    for name in ("title", "text"):
        value, ok = usable_text(record.get(name))
        if not ok:
            shown = f"{type(record.get(name)).__name__} {repr(record.get(name))[:40]}"
            return None, RecordProblem(
                f"{where} (_id {doc_id}): unusable {name} ({shown})", f"unusable_{name}"
            )
        cleaned[name] = value
    return cleaned, None


# A corpus.jsonl record is one line of a few KB: a line past the cap is rejected while it is read (never held
# whole), and so is a record nested deeper than a flat record needs (json.loads would raise RecursionError).
MAX_RECORD_BYTES = 4 * 1024 * 1024
MAX_RECORD_DEPTH = 32


def _capped_lines(handle, cap: int) -> Iterator[tuple[int, bytes | None, int]]:
    """(line number, line, size) for every line of a binary file; a line longer than `cap` bytes comes back as
    None with the size it had, read past in 1 MB steps."""
    number = 0
    while True:
        line = handle.readline(cap + 1)
        if not line:
            return
        number += 1
        if len(line) <= cap or line.endswith(b"\n"):
            yield number, line, len(line)
            continue
        size = len(line)
        while line and not line.endswith(b"\n"):
            line = handle.readline(1 << 20)
            size += len(line)
        yield number, None, size


def _nesting_depth(value: object) -> int:
    """How deeply lists and objects nest in a decoded JSON value (iterative: no recursion to exhaust)."""
    deepest, pending = 0, [(value, 1)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, depth)
            pending.extend(
                (child, depth + 1) for child in (item.values() if isinstance(item, dict) else item)
            )
    return deepest


def iter_corpus_records(
    root: Path, repairs: list[str] | None = None, *, max_record_bytes: int = MAX_RECORD_BYTES
) -> Iterator[tuple[int, dict | None, RecordProblem | None]]:
    """(line number, record, problem) for every non-empty line of corpus.jsonl. A line that is not JSON, too long,
    too deep, without a usable `_id`, title or text, or repeating an earlier `_id` is a problem naming the line;
    bytes that are not UTF-8 and lone surrogates are replaced (U+FFFD) and noted in `repairs`."""
    first_line_of: dict[str, int] = {}
    with (Path(root) / "corpus.jsonl").open("rb") as handle:
        for number, raw, size in _capped_lines(handle, max_record_bytes):
            where = f"corpus.jsonl line {number}"
            if raw is None:
                cap = f"{size:,} bytes, over the {max_record_bytes:,} byte record cap"
                yield number, None, RecordProblem(f"{where}: {cap}", "record_too_large")
                continue
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError:
                line = raw.decode("utf-8", errors="replace")
                if repairs is not None:
                    repairs.append(f"{where}: bytes that are not UTF-8 replaced")
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except RecursionError:
                record = None  # deeper than the parser goes: refused below like any record too deep
                depth = MAX_RECORD_DEPTH + 1
            except json.JSONDecodeError as exc:
                yield number, None, RecordProblem(f"{where}: not JSON ({exc.msg})", "invalid_json")
                continue
            else:
                depth = _nesting_depth(record)
            if depth > MAX_RECORD_DEPTH:
                too_deep = f"{where}: nested deeper than {MAX_RECORD_DEPTH} levels"
                yield number, None, RecordProblem(too_deep, "too_deep")
                continue
            record, fixed = clean_strings(record)
            if fixed and repairs is not None:
                repairs.append(f"{where}: {fixed} string(s) with lone surrogates repaired")
            record, problem = check_corpus_record(record, number)
            if record is not None:
                first = first_line_of.setdefault(record["_id"], number)
                if first != number:
                    duplicate = f"duplicate _id {record['_id'][:60]!r} (first on line {first}, which is kept)"
                    record, problem = None, RecordProblem(f"{where}: {duplicate}", "duplicate_id")
            yield number, record, problem


def read_corpus(root: Path) -> dict[str, dict[str, str]]:
    """doc id -> {"title", "text"}; a malformed line raises CollectionError naming it."""
    corpus: dict[str, dict[str, str]] = {}
    for _, record, error in iter_corpus_records(root):
        if error and error.reason == "duplicate_id":
            continue  # the first record of an id is the one kept, as everywhere
        if error:
            raise CollectionError(f"{root}: {error}")
        corpus[record["_id"]] = {"title": record.get("title") or "", "text": record.get("text") or ""}
    return corpus


def read_queries(root: Path) -> dict[str, str]:
    """query id -> text from queries.jsonl; ids are strings as written (a line whose `_id` is null, a list
    or a non-integral number, or whose text is not a string, is skipped), text valid UTF-8."""
    queries: dict[str, str] = {}
    with (Path(root) / "queries.jsonl").open(encoding="utf-8", errors="replace") as handle:
        for line in handle:
            if line.strip():
                row, _ = clean_strings(json.loads(line))
                query_id = usable_identifier(row.get("_id")) if isinstance(row, dict) else None
                text, ok = usable_text(row.get("text")) if query_id else (None, False)
                if ok:
                    queries[query_id] = text
    return queries


def _is_number(value: str) -> bool:
    try:
        float(value)
    except ValueError:
        return False
    return True


def read_qrels(path: Path) -> dict[str, dict[str, int]]:
    """query id -> {doc id: relevance} from a BEIR qrels TSV (query-id, corpus-id, score). A first line whose score
    is not a number is the header; relevance is `int(float(x))` (some sets write 1.0); short lines are skipped."""
    qrels: dict[str, dict[str, int]] = {}
    with Path(path).open(encoding="utf-8") as handle:
        for number, line in enumerate(handle):
            parts = line.rstrip("\r\n").split("\t")
            if len(parts) < 3:
                continue
            if number == 0 and not _is_number(parts[2].strip()):
                continue  # header
            qrels.setdefault(parts[0], {})[parts[1]] = int(float(parts[2]))
    return qrels


def qrels_path(root: Path, split: str) -> Path:
    """qrels/<split>.tsv, or CollectionError naming the splits there are."""
    path = Path(root) / "qrels" / f"{split}.tsv"
    if not path.exists():
        available = ", ".join(available_splits(root)) or "none"
        raise CollectionError(f"no qrels for split {split!r} in {root} (available: {available})")
    return path


DEFAULT_SPLIT_ORDER = ("test", "dev", "train")


def available_splits(root: Path) -> list[str]:
    folder = Path(root) / "qrels"
    return sorted(p.stem for p in folder.glob("*.tsv")) if folder.is_dir() else []


def pick_split(root: Path, order: str | tuple[str, ...] | list[str] = DEFAULT_SPLIT_ORDER) -> str:
    """The first split of `order` (a name, or comma-separated names, tried in turn) that has qrels/<split>.tsv
    in `root`; CollectionError naming the splits there are when none has."""
    names = [s.strip() for s in order.split(",")] if isinstance(order, str) else list(order)
    present = available_splits(root)
    for name in names:
        if name and name in present:
            return name
    raise CollectionError(
        f"none of the splits {', '.join(n for n in names if n)} has qrels in {root} "
        f"(available: {', '.join(present) or 'none'})"
    )


def load_beir(root: Path, split: str = "test") -> Collection:
    """The BEIR collection with the queries that have qrels in `split`."""
    root = Path(root)
    qrels = read_qrels(qrels_path(root, split))
    queries = {qid: text for qid, text in read_queries(root).items() if qid in qrels}
    return Collection(root.name, read_corpus(root), queries, qrels, [root / "corpus.jsonl"])


_SMART_FIELD = re.compile(r"^\.([A-Z])(?:\s+(.*))?$")


def parse_smart(text: str) -> dict[str, dict[str, str]]:
    """SMART records (`.I id` then `.T` title, `.A` authors, `.W` text, `.X` links ...) to {id: {field: text}}."""
    records: dict[str, dict[str, str]] = {}
    current: dict[str, list[str]] | None = None
    current_field = None
    for line in text.splitlines():
        match = _SMART_FIELD.match(line.rstrip())
        if match:
            tag, rest = match.group(1), (match.group(2) or "").strip()
            if tag == "I":
                current = {}
                records[rest] = current  # type: ignore[assignment]
                current_field = None
                continue
            current_field = tag
            if current is not None:
                current.setdefault(tag, [])
                if rest:
                    current[tag].append(rest)
            continue
        if current is not None and current_field is not None:
            current[current_field].append(line.strip())
    return {
        doc_id: {tag: " ".join(part for part in parts if part).strip() for tag, parts in fields.items()}
        for doc_id, fields in records.items()
    }


def load_smart(root: Path) -> Collection:
    all_file = next(iter(sorted(root.glob("*.ALL"))))
    stem = all_file.stem
    docs = parse_smart(all_file.read_text(encoding="utf-8", errors="replace"))
    corpus = {
        doc_id: {"title": f.get("T", ""), "text": f.get("W", ""), "authors": f.get("A", "")}
        for doc_id, f in docs.items()
    }
    qry_file = root / f"{stem}.QRY"
    rel_file = root / f"{stem}.REL"
    if not qry_file.exists() or not rel_file.exists():
        raise CollectionError(
            f"SMART collection {root} needs {stem}.QRY and {stem}.REL beside {all_file.name}"
        )
    raw_queries = parse_smart(qry_file.read_text(encoding="utf-8", errors="replace"))
    queries = {
        qid: " ".join(part for part in (f.get("T", ""), f.get("W", "")) if part).strip()
        for qid, f in raw_queries.items()
    }
    qrels: dict[str, dict[str, int]] = {}
    for line in rel_file.read_text(encoding="utf-8", errors="replace").splitlines():
        parts = line.split()
        if len(parts) >= 2:
            qrels.setdefault(parts[0], {})[parts[1]] = 1
    queries = {qid: text for qid, text in queries.items() if qid in qrels and text}
    return Collection(stem.lower(), corpus, queries, qrels, [all_file])


def paper_id_for_doc(collection_name: str, doc_id: str) -> str:
    return f"beir-{collection_name}:{doc_id}"


def doc_id_for_paper(collection_name: str, paper_id: str) -> str:
    prefix = f"beir-{collection_name}:"
    return paper_id[len(prefix) :] if paper_id.startswith(prefix) else paper_id


def collection_tables(collection: Collection, count_tokens=None):
    """(papers, passages) polars frames for the collection, chunked exactly as the product chunks papers."""
    import polars as pl

    from lumina_assets.parsing.chunking import passages_for_paper

    paper_rows = []
    passage_rows = []
    for doc_id, doc in collection.corpus.items():
        paper_id = paper_id_for_doc(collection.name, doc_id)
        authors = [a.strip() for a in re.split(r";|\band\b", doc.get("authors", "")) if a.strip()]
        paper_rows.append(
            {
                "paper_id": paper_id,
                "title": doc["title"],
                "abstract": doc["text"],
                "authors": authors,
                "source": "beir",
                "source_id": doc_id,
            }
        )
        for passage in passages_for_paper(
            paper_id, title=doc["title"], abstract=doc["text"], count_tokens=count_tokens
        ):
            passage_rows.append(passage.to_row())
    papers = pl.DataFrame(
        paper_rows,
        schema={
            "paper_id": pl.String,
            "title": pl.String,
            "abstract": pl.String,
            "authors": pl.List(pl.String),
            "source": pl.String,
            "source_id": pl.String,
        },
    )
    from lumina_assets.core.schemas import PASSAGE_SCHEMA, rows_to_table

    passages = pl.from_arrow(rows_to_table(passage_rows, PASSAGE_SCHEMA))
    return papers, passages
