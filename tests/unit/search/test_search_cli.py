"""The CLI: `lumina eval beir` on a tiny BEIR directory cut from SciFact, `lumina search` on a tiny index, and the
SMART (CISI) loader that lets `eval beir` read classic collections."""

from __future__ import annotations

import json

import numpy as np
import pytest

from lumina_assets.cli.main import main
from lumina_assets.corpus.collections import load_collection, parse_smart

METRIC_KEYS = {"ndcg@10", "map@10", "recall@100", "mrr@10", "index_seconds", "query_p50_ms", "query_p95_ms"}


@pytest.fixture(scope="module")
def tiny_beir(tmp_path_factory, shared_data):
    """12 SciFact train claims, their relevant abstracts and 18 other abstracts, in BEIR layout."""
    root = shared_data / "scifact"
    qrels_lines = (root / "qrels" / "train.tsv").read_text().splitlines()
    qrels: dict[str, list[str]] = {}
    for line in qrels_lines[1:]:
        qid, doc, _ = line.split("\t")
        qrels.setdefault(qid, []).append(doc)
    chosen_queries = list(qrels)[:12]
    wanted = {d for q in chosen_queries for d in qrels[q]}
    corpus_lines = []
    others = 0
    with (root / "corpus.jsonl").open() as handle:
        for line in handle:
            doc = json.loads(line)["_id"]
            if doc in wanted or others < 18:
                corpus_lines.append(line.rstrip("\n"))
                others += doc not in wanted
    query_lines = [
        line
        for line in (root / "queries.jsonl").read_text().splitlines()
        if json.loads(line)["_id"] in chosen_queries
    ]
    target = tmp_path_factory.mktemp("beir") / "tinyfact"
    (target / "qrels").mkdir(parents=True)
    (target / "corpus.jsonl").write_text("\n".join(corpus_lines) + "\n")
    (target / "queries.jsonl").write_text("\n".join(query_lines) + "\n")
    rows = ["query-id\tcorpus-id\tscore"] + [f"{q}\t{d}\t1" for q in chosen_queries for d in qrels[q]]
    (target / "qrels" / "train.tsv").write_text("\n".join(rows) + "\n")
    return target


def test_eval_beir_prints_metrics_json_and_reuses_its_index(tiny_beir, data_dir, capsys):
    assert main(["eval", "beir", str(tiny_beir), "--split", "train", "--json"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    result = json.loads(lines[-1])
    assert METRIC_KEYS <= set(result)
    assert result["index_reused"] is False
    # 12 claims against 28 abstracts, bundled MiniLM: measured 0.899 (pinned; one claim moving is ~0.08)
    assert result["ndcg@10"] == pytest.approx(0.899, abs=0.03)
    assert result["recall@100"] == 1.0  # fewer documents than the cut-off: everything relevant is retrieved
    assert 0 < result["query_p50_ms"] <= result["query_p95_ms"]
    eval_dirs = list((data_dir / "eval").iterdir())
    assert len(eval_dirs) == 1 and eval_dirs[0].name.startswith("tinyfact-")

    assert main(["eval", "beir", str(tiny_beir), "--split", "train", "--json"]) == 0
    again = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert again["index_reused"] is True
    assert again["ndcg@10"] == result["ndcg@10"]


def test_eval_beir_unknown_split_is_a_clear_error(tiny_beir, data_dir, capsys):
    assert main(["eval", "beir", str(tiny_beir), "--split", "dev"]) == 2
    assert "no qrels for split 'dev'" in capsys.readouterr().err


def test_search_cli_on_a_tiny_index(tiny_beir, data_dir, capsys, monkeypatch):
    from lumina_assets.core import settings
    from lumina_assets.corpus.collections import collection_tables
    from lumina_assets.indexing import lancedb_tables as indexing
    from lumina_assets.indexing.connection import connect_lancedb
    from lumina_assets.indexing.embedding import Embedder

    # before any index exists: a message, not a traceback
    assert main(["search", "aspirin and stroke"]) == 2
    assert "No search index yet" in capsys.readouterr().err

    collection = load_collection(tiny_beir, split="train")
    embedder = Embedder(batch_size=32)
    papers, passages = collection_tables(collection, embedder.token_counter())
    indexing.index_corpus(connect_lancedb(settings.lancedb_uri()), passages, papers, embedder)

    claim = next(iter(collection.queries.values()))
    assert main(["search", claim, "-k", "3", "--json"]) == 0
    contexts = json.loads(capsys.readouterr().out)
    assert 1 <= len(contexts) <= 3
    assert {"paper_id", "title", "doi", "url", "chunks", "score", "passage_ids"} <= set(contexts[0])

    assert main(["search", claim, "-k", "2"]) == 0
    readable = capsys.readouterr().out
    # the count above the relevance line (the bundled model has one), then the results
    first, *rest = readable.splitlines()
    assert first.endswith(("paper matches", "papers match")) and "> " in readable
    assert any(line.startswith(" 1. ") for line in rest)
    # not a terminal: evidence sentences in [[ ]] markers, every score explained, no escape codes
    assert "[[" in readable and "]]" in readable and "\x1b[" not in readable
    assert readable.count("found by ") == 2 and "fusion" in readable and "[1] abstract" in readable
    assert main(["search", claim, "-k", "1", "--color", "always"]) == 0
    colored = capsys.readouterr().out
    assert "\x1b[1m" in colored and "[[" not in colored

    assert main(["search", "   "]) == 2  # nothing to search for: an error that says how to give a query
    assert "give a query" in capsys.readouterr().err

    # a query model other than the one that built the index: a clear message, not a shape error
    monkeypatch.setattr(Embedder, "encode_queries", lambda self, texts: np.ones((len(texts), 8), np.float32))
    assert main(["search", claim]) == 2
    assert "384-d vectors but the query model gives 8-d" in capsys.readouterr().err


def test_smart_cisi_is_converted_on_the_fly(shared_data):
    collection = load_collection(shared_data / "cisi")
    assert collection.name == "cisi"
    assert len(collection.corpus) == 1460
    assert len(collection.queries) == 76  # the queries that have judgments
    assert sum(len(v) for v in collection.qrels.values()) == 3114
    first = collection.corpus["1"]
    assert first["title"] == "18 Editions of the Dewey Decimal Classifications"
    assert first["text"].startswith("The present study is a history of the DEWEY Decimal Classification.")
    assert "Comaromi" in first["authors"]


def test_parse_smart_keeps_multiline_fields():
    records = parse_smart(".I 7\n.T\nA title\non two lines\n.W\nBody text.\n.I 8\n.W\nSecond.\n")
    assert records == {"7": {"T": "A title on two lines", "W": "Body text."}, "8": {"W": "Second."}}


def test_eval_overrides_are_typed_and_refuse_what_cannot_be_set():
    from lumina_assets.cli.evaluation import _parse_overrides
    from lumina_assets.search.config import SearchConfig

    changes = _parse_overrides(
        ['weights={"passage_vectors": 2}', "candidates=50", "parse_query=no", "rrf_k=10"]
    )
    weights = SearchConfig(**changes).weights  # the named weight, the others at their defaults
    assert weights["passage_vectors"] == 2 and weights["passage_fulltext"] == 1.0
    assert changes["candidates"] == 50 and changes["parse_query"] is False and changes["rrf_k"] == 10
    with pytest.raises(SystemExit, match="unknown SearchConfig field"):
        _parse_overrides(["no_such_field=1"])
    with pytest.raises(SystemExit, match="LUMINA_RERANK_MODEL"):
        _parse_overrides(["rerank=my-model"])


def test_render_results_shows_where_each_passage_is_and_why_it_scored():
    from lumina_assets.cli.search import render_results

    text = "Citations train the model. Venues do not matter."
    answer = {
        "constraints": [
            {"kind": "year", "value": {"min": 2020, "max": None}, "mode": "boost", "as_filter": "year>=2020"}
        ],
        "results": [
            {
                "rank": 1,
                "paper_id": "doi:10.1/x",
                "title": "SPECTER",
                "authors": ["Arman Cohan", "Sergey Feldman", "Iz Beltagy", "Doug Downey"],
                "year": 2020,
                "venue": "ACL",
                "doi": "10.1/x",
                "url": None,
                "score": 0.8123,
                "explanation": {
                    "found_by": [{"retriever": "passage_fulltext", "label": "passage words (BM25)"}],
                    "fusion": "weighted",
                    "boosts": ["year 2020 in the asked range ×1.1"],
                    "best_evidence_score": 0.93,
                },
                "passages": [
                    {
                        "number": 1,
                        "kind": "text",
                        "section_number": "3.2",
                        "section_title": "Training",
                        "page_start": 4,
                        "page_end": 5,
                        "text": text,
                        "highlights": [{"start": 0, "end": 26, "score": 0.93, "dense": 0.5, "lexical": 2.0}],
                    }
                ],
            }
        ],
    }
    plain = render_results(answer)
    assert "understood: year 2020–…: boost only; `year>=2020` filters" in plain
    assert "Arman Cohan, Sergey Feldman, Iz Beltagy et al. · 2020 · ACL · doi:10.1/x" in plain
    assert "[1] text · § 3.2 Training · pp. 4–5" in plain
    assert "> [[Citations train the model.]] Venues do not matter." in plain
    assert "score 0.812 (weighted fusion) · found by passage words (BM25) · boosts: year 2020" in plain
    colored = render_results(answer, color=True)
    assert "\x1b[1mCitations train the model.\x1b[0m Venues" in colored and "[[" not in colored


def test_eval_beir_subset_scores_only_the_tuning_or_the_held_out_half(tiny_beir, data_dir, capsys):
    """`--subset tuning` reads only the queries tuning may use (corpus.splits), `heldout` the others; one index."""
    from lumina_assets.corpus import splits

    qids = [json.loads(line)["_id"] for line in (tiny_beir / "queries.jsonl").read_text().splitlines()]
    counts = {}
    for subset in ("tuning", "heldout"):
        assert main(["eval", "beir", str(tiny_beir), "--split", "train", "--subset", subset, "--json"]) == 0
        out = capsys.readouterr().out.strip().splitlines()
        result = json.loads(out[-1])
        counts[subset] = result["queries"]
        assert result["subset"] == f"train-{subset}" and f"(train-{subset})" in out[0]
    assert counts == {"tuning": len(splits.tuning_ids(qids)), "heldout": len(splits.held_out_ids(qids))}
    assert 0 < counts["tuning"] < len(qids)
    assert len(list((data_dir / "eval").iterdir())) == 1
