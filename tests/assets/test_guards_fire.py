"""Every asset check seen failing on a bad input, beside the same check passing on a good one: a guard only ever
seen passing could be one that cannot fail. (`parse_failure_rate` fires in test_parse_assets.py:
test_a_parser_that_fails_everything_blocks_indexing.)"""

from __future__ import annotations

import dagster as dg
import polars as pl
import pytest
from benchmark_slice import materialize_stages, write_scifact_slice
from hashing_embedder import HashingEmbedder

from lumina_assets.core import tables
from lumina_assets.core.schemas import PAPERS_TABLE_SCHEMA, rows_to_table
from lumina_assets.indexing import lancedb_tables as indexing
from lumina_assets.indexing.connection import connect_lancedb
from lumina_assets.parsing.chunking import passages_for_paper
from resources.embedder import EmbedderResource
from resources.lancedb import LanceDBResource

BATCH = "batch-guards"


# ---------------------------------------------------------------- papers_unique_and_titled


def test_papers_check_fails_on_duplicate_ids_and_untitled_papers(data_dir):
    from lumina_assets.defs.corpus import papers_unique_and_titled

    assert not papers_unique_and_titled().passed  # no table at all
    tables.write(tables.PAPERS, pl.DataFrame({"paper_id": ["doi:a", "doi:b"], "title": ["A", "B"]}))
    good = papers_unique_and_titled()
    assert good.passed and good.metadata["papers"].value == 2

    tables.write(tables.PAPERS, pl.DataFrame({"paper_id": ["doi:a", "doi:a"], "title": ["A", "A again"]}))
    duplicated = papers_unique_and_titled()
    assert not duplicated.passed and duplicated.metadata["duplicate_ids"].value == 1

    tables.write(tables.PAPERS, pl.DataFrame({"paper_id": ["doi:a", "doi:b"], "title": ["A", "  "]}))
    untitled = papers_unique_and_titled()
    assert not untitled.passed and untitled.metadata["untitled"].value == 1


# ---------------------------------------------------------------- questions_are_wellformed


def test_questions_check_fails_on_duplicates_empty_text_and_no_questions(data_dir):
    from lumina_assets.defs.benchmark import questions_are_wellformed

    assert not questions_are_wellformed().passed  # no table
    tables.write(tables.QUESTIONS, pl.DataFrame({"question_id": ["q1", "q2"], "text": ["why?", "how?"]}))
    assert questions_are_wellformed().passed

    tables.write(tables.QUESTIONS, pl.DataFrame({"question_id": ["q1", "q1"], "text": ["why?", "how?"]}))
    duplicated = questions_are_wellformed()
    assert not duplicated.passed and duplicated.metadata["duplicate_ids"].value == 1

    tables.write(tables.QUESTIONS, pl.DataFrame({"question_id": ["q1", "q2"], "text": ["why?", "   "]}))
    empty = questions_are_wellformed()
    assert not empty.passed and empty.metadata["empty_texts"].value == 1

    tables.write(tables.QUESTIONS, pl.DataFrame(schema={"question_id": pl.String, "text": pl.String}))
    assert not questions_are_wellformed().passed  # a table with no question


# ---------------------------------------------------------------- no_empty_passages (blocking)


def _paper(paper_id: str, **fields) -> dict:
    row = {
        "paper_id": paper_id,
        "source": "beir",
        "ingest_batch": BATCH,
        "pdf_urls": [],
        "authors": [],
        "keywords": [],
        "references": [],
    }
    row.update(fields)
    return row


@dg.asset(partitions_def=dg.DynamicPartitionsDefinition(name="ingest_batches"), deps=["passages"])
def after_passages(context) -> None:
    """Stands for whatever reads `passages` next (passage_index): it must not run after a failed blocking check."""
    (tables.PASSAGES.path(context.partition_key).parent / "downstream-ran").write_text("yes")


def _materialize_batch(rows: list[dict]) -> dg.ExecuteInProcessResult:
    from lumina_assets.defs.parsing import ASSETS, build_resources

    tables.write(tables.PAPERS, rows_to_table(rows, PAPERS_TABLE_SCHEMA))
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("ingest_batches", [BATCH])
    return dg.materialize(
        [*ASSETS, after_passages],
        instance=instance,
        partition_key=BATCH,
        resources=build_resources(),
        raise_on_error=False,
    )


def _no_empty_passages(result) -> dg.AssetCheckEvaluation:
    found = [e for e in result.get_asset_check_evaluations() if e.check_name == "no_empty_passages"]
    assert len(found) == 1
    return found[0]


def test_no_empty_passages_passes_and_lets_the_batch_through(data_dir):
    result = _materialize_batch(
        [_paper("beir-x:1", title="Aspirin and stroke", abstract="Aspirin lowers the risk of stroke.")]
    )
    assert result.success
    assert _no_empty_passages(result).passed
    assert (tables.PASSAGES.path(BATCH).parent / "downstream-ran").exists()


def test_no_empty_passages_fires_on_a_paper_without_text_and_blocks_downstream(data_dir):
    """A record with no title, no abstract and no PDF yields no passage: the check fails, names the paper, and
    the step after `passages` never runs."""
    result = _materialize_batch(
        [
            _paper("beir-x:1", title="Aspirin and stroke", abstract="Aspirin lowers the risk of stroke."),
            _paper("beir-x:hollow", title=None, abstract=None),
        ]
    )
    assert not result.success
    evaluation = _no_empty_passages(result)
    assert not evaluation.passed
    assert evaluation.metadata["papers_without_passages"].value == 1
    assert evaluation.metadata["examples"].value == ["beir-x:hollow"]
    assert not (tables.PASSAGES.path(BATCH).parent / "downstream-ran").exists()
    step = result.get_step_success_events()
    assert "after_passages" not in {event.step_key for event in step}


# ---------------------------------------------------------------- passage_index checks


def _index_tables(n_papers: int) -> tuple[pl.DataFrame, pl.DataFrame]:
    papers, passages = [], []
    for i in range(n_papers):
        paper_id = f"doi:10.1/g{i}"
        title, abstract = f"Paper {i} on topic {i % 3}", f"Results of study {i}. A second sentence about {i}."
        papers.append({"paper_id": paper_id, "title": title, "abstract": abstract, "source": "test"})
        passages += [p.to_row() for p in passages_for_paper(paper_id, title=title, abstract=abstract)]
    return pl.DataFrame(papers), pl.DataFrame(passages)


def test_row_count_check_fails_when_the_index_misses_upstream_passages(data_dir):
    from lumina_assets.defs.indexing import passage_index_row_count

    papers, passages = _index_tables(6)
    tables.write(tables.PAPERS, papers)
    tables.write(tables.PASSAGES, passages, "batch-1")
    lancedb = LanceDBResource()
    context = dg.build_asset_check_context(instance=dg.DagsterInstance.ephemeral())  # no batch held

    def row_count() -> dg.AssetCheckResult:
        return passage_index_row_count(context, lancedb=lancedb)

    assert not row_count().passed  # nothing indexed yet

    indexing.index_corpus(lancedb.connect(), passages, papers, HashingEmbedder())
    assert row_count().passed

    # a new batch lands upstream and the index is not rebuilt: the check sees the gap
    more_papers, more_passages = _index_tables(9)
    tables.write(tables.PAPERS, more_papers)
    tables.write(
        tables.PASSAGES,
        more_passages.filter(~pl.col("passage_id").is_in(passages["passage_id"].implode())),
        "b2",
    )
    stale = row_count()
    assert not stale.passed
    assert (stale.metadata["expected"].value, stale.metadata["indexed"].value) == (
        more_passages.height,
        passages.height,
    )


@pytest.mark.slow
def test_vector_dimension_check_fails_for_an_index_of_another_dimension(data_dir):
    """An index written by a 64-dimension embedder, checked against the configured MiniLM (384): fails; the same
    index checked against a 64-dimension model passes."""
    from lumina_assets.defs.indexing import passage_index_vector_dimension

    papers, passages = _index_tables(4)
    lancedb = LanceDBResource()
    assert not passage_index_vector_dimension(lancedb=lancedb, embedder=EmbedderResource()).passed  # no index
    indexing.index_corpus(connect_lancedb(lancedb.resolved_uri()), passages, papers, HashingEmbedder(64))
    mismatch = passage_index_vector_dimension(lancedb=lancedb, embedder=EmbedderResource())
    assert not mismatch.passed
    assert mismatch.metadata["model_dimension"].value == 384
    assert mismatch.metadata["passages.vector"].value == 64

    class SixtyFour(EmbedderResource):
        def get_embedder(self):
            return HashingEmbedder(64)

    assert passage_index_vector_dimension(lancedb=lancedb, embedder=SixtyFour()).passed


# ---------------------------------------------------------------- judge_failure_rate


def _scifact_slice(shared_data) -> None:
    """papers + passages of the relevant abstracts of 6 SciFact train claims and 30 others."""
    write_scifact_slice(shared_data, claims=6, distractors=30)


def _run_benchmark_with_judge(shared_data, answer) -> dg.AssetCheckEvaluation:
    """Questions (offline generator), the bm25 provider at depth 0, judgments by an OpenAI-compatible endpoint
    that answers `answer(prompt)`, then scores; returns the judge_failure_rate evaluation."""
    import json

    import httpx2
    from fake_llm import openai_chat_response

    from lumina_assets.defs import benchmark
    from resources.llm import LLMResource
    from resources.providers import ExaResource, SemanticScholarResource, SerpApiScholarResource

    def handler(request: httpx2.Request) -> httpx2.Response:
        return openai_chat_response(answer(json.loads(request.content)["messages"][-1]["content"]))

    class MockedJudge(LLMResource):
        def get_client(self, http_client=None):
            return super().get_client(http_client=httpx2.Client(transport=httpx2.MockTransport(handler)))

    resources = {
        "question_llm": LLMResource(
            backend="anthropic", model="claude-sonnet-4-6"
        ),  # no key: offline, labelled
        "judge_llm": MockedJudge(backend="openai", model="gpt-4o", api_key="sk-test", temperature=0.0),
        "semantic_scholar": SemanticScholarResource(),
        "google_scholar": SerpApiScholarResource(),
        "exa": ExaResource(),
    }
    folder = str(shared_data / "scifact")
    config = benchmark.default_run_config(
        synthetic=1, beir_queries=2, depths=[0], page_sizes=[2], calibration_queries=3, providers=["bm25"]
    )
    config["ops"]["user_queries"]["config"]["beir_dir"] = folder
    config["ops"]["benchmark_scores"]["config"].update(
        {"calibration_dir": folder, "validation_queries_llm": 1, "bootstrap_resamples": 50}
    )
    instance = dg.DagsterInstance.ephemeral()
    stages = [
        ([benchmark.synthetic_questions, benchmark.user_queries, benchmark.questions], [None]),
        ([benchmark.provider_results, benchmark.recursive_results, benchmark.judgments], ["bm25"]),
        ([benchmark.benchmark_scores], [None]),
    ]
    result = materialize_stages(resources, config, stages, instance)
    found = [e for e in result.get_asset_check_evaluations() if e.check_name == "judge_failure_rate"]
    assert len(found) == 1
    return found[0]


def _well_formed(prompt: str) -> str:
    if "Sentences: " in prompt:
        import re

        count = len(re.findall(r"(?:^|\s)(\d+)\. ", prompt.split("Sentences: ", 1)[1]))
        return " ".join(f"{i}. <not_critical>" for i in range(1, count + 1))
    return "<not_relevant>"


@pytest.mark.slow
def test_judge_failure_rate_passes_with_a_judge_that_answers_in_format(shared_data, data_dir):
    _scifact_slice(shared_data)
    good = _run_benchmark_with_judge(shared_data, _well_formed)
    assert good.passed and good.metadata["failed_pairs"].value == 0 and good.metadata["pairs"].value > 0


@pytest.mark.slow
def test_judge_failure_rate_fires_when_the_judge_answers_out_of_format(shared_data, data_dir):
    """Its own data dir (the LLM answers are cached on disk): every answer out of format, after the retries."""
    _scifact_slice(shared_data)
    bad = _run_benchmark_with_judge(shared_data, lambda prompt: "I would rather not say.")
    assert not bad.passed
    assert bad.metadata["failure_rate"].value == 1.0
    assert bad.metadata["failed_pairs"].value == bad.metadata["pairs"].value > 0
