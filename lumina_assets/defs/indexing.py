"""Index stage: `passage_index` keeps the LanceDB `passages` and `papers` tables in step with the upstream tables,
leaving out the batches held by a failed blocking check (`defs/batch_holds.py`)."""

import dagster as dg
import polars as pl

from lumina_assets.core import settings, tables
from lumina_assets.defs import batch_holds
from lumina_assets.defs import parsing as parse_stage
from lumina_assets.indexing import lancedb_tables as indexing
from lumina_assets.indexing import model_identity, staged_vectors
from lumina_assets.indexing.index_rows import INDEX_FORMAT_VERSION
from lumina_assets.search.neighbour_graph import MAX_GRAPH_PAPERS, graph_rows, keep_graph
from resources.embedder import EmbedderResource
from resources.lancedb import LanceDBResource

INDEX_CODE_VERSION = f"index-v{INDEX_FORMAT_VERSION}"


def _holds(instance: dg.DagsterInstance) -> tuple[dict[str, list[batch_holds.Hold]], dict[str, int]]:
    """The batches held by a failed blocking check (parsed_papers, passages) that still have papers in the catalogue
    (one whose papers left has nothing to hold), and the papers of each held batch."""
    holds = batch_holds.held_batches(instance, batch_holds.blocking_check_keys(parse_stage.ASSETS))
    held_papers = _papers_per_batch(holds)
    return {batch: found for batch, found in holds.items() if held_papers.get(batch)}, held_papers


def _upstream(held: frozenset[str] = frozenset()) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Every batch's passages of the papers in the catalogue, and the catalogue, less the papers of held batches."""
    passages = tables.read_all(tables.PASSAGES)
    papers = tables.read(tables.PAPERS)
    if passages is None:
        passages = pl.DataFrame(
            schema={"passage_id": pl.String, "paper_id": pl.String, "kind": pl.String, "text": pl.String}
        )
    if papers is None:
        papers = pl.DataFrame(schema={"paper_id": pl.String, "title": pl.String})
    for column in ("section_number", "section_title", "prev_id", "next_id"):
        if column not in passages.columns:
            passages = passages.with_columns(pl.lit(None, dtype=pl.String).alias(column))
    # passages of papers no longer in the catalogue leave the index; so do a held batch's papers, an earlier
    # indexed version included, until the batch passes its checks or leaves the catalogue
    if held and "ingest_batch" in papers.columns:
        papers = papers.filter(~(pl.col("ingest_batch").is_in(sorted(held)).fill_null(False)))
    passages = passages.filter(pl.col("paper_id").is_in(papers["paper_id"].implode()))
    return passages, papers


def indexable_upstream(instance: dg.DagsterInstance) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The passages and papers passage_index indexes now: every batch's, less those of held batches."""
    return _upstream(frozenset(_holds(instance)[0]))


def _papers_per_batch(batches) -> dict[str, int]:
    papers = tables.read(tables.PAPERS)
    if papers is None or "ingest_batch" not in papers.columns:
        return {}
    return dict(
        papers.filter(pl.col("ingest_batch").is_in(sorted(batches)))
        .group_by("ingest_batch")
        .len()
        .iter_rows()
    )


def _graph_metadata(db) -> dict:
    """Keep the paper neighbour graph up to date; the metadata says whether search smooths with it."""
    keep_graph(db)
    graph_papers = graph_rows(db)
    return {
        "neighbour_smoothing": (
            f"on: paper neighbour graph of {graph_papers} papers (search adds a share of each paper's nearest "
            "papers' scores)"
            if graph_papers
            else f"off: no paper neighbour graph (built for indexes of at most {MAX_GRAPH_PAPERS:,} papers)"
        )
    }


def _sentence_cost(stats) -> dict:
    """Sentence vectors' rate and their seconds beside the passages' (LUMINA_SENTENCE_VECTORS=0 leaves them out)."""
    passages_rate = stats.passages_embedded / stats.embed_seconds if stats.embed_seconds else 0.0
    sentences_rate = stats.sentences_embedded / stats.sentence_seconds if stats.sentence_seconds else 0.0
    cost = {
        "passage_seconds": round(stats.embed_seconds, 2),
        "passages_per_second": round(passages_rate, 1),
        "sentences_per_second": round(sentences_rate, 1),
    }
    if stats.embed_seconds and stats.sentence_seconds:
        cost["sentence_seconds_per_passage_second"] = round(stats.sentence_seconds / stats.embed_seconds, 3)
    return cost


@dg.asset(
    group_name="index",
    # staged_passage_vectors: the fan-out's vectors, reused here; it never decides when the index runs
    deps=[dg.AssetDep("passages"), dg.AssetDep("papers"), dg.AssetDep("staged_passage_vectors")],
    code_version=INDEX_CODE_VERSION,
    automation_condition=dg.AutomationCondition.eager().ignore(
        dg.AssetSelection.assets("staged_passage_vectors")
    ),
    description="LanceDB passages (text vectors + full text) and papers (title / abstract vectors + full text).",
)
def passage_index(
    context: dg.AssetExecutionContext, lancedb: LanceDBResource, embedder: EmbedderResource
) -> dg.MaterializeResult:
    holds, held_papers = _holds(context.instance)
    for batch, found in holds.items():
        context.log.warning(
            f"batch {batch} held out of the index ({held_papers[batch]} papers): "
            + "; ".join(f"{hold.check}: {hold.reason}" for hold in found)
        )
    passages, papers = _upstream(frozenset(holds))
    db = lancedb.connect()
    index_embedder = embedder.get_embedder()
    staged = staged_vectors.StagedVectorEmbedder(db, index_embedder)
    stats = indexing.index_corpus(
        db,
        passages,
        papers,
        staged,
        indexing.IndexConfig(sentence_vectors=settings.get().embedding.sentence_vectors),
        log_fn=context.log.info,
    )
    staged_vectors.discard_staged(db)  # the index holds them now
    neighbour_graph = _graph_metadata(db)
    passages_table = indexing.open_table(db, indexing.PASSAGES_TABLE)
    sample = passages_table.search().select(["passage_id", "title", "text"]).limit(5).to_polars()
    throughput = stats.passages_embedded / stats.embed_seconds if stats.embed_seconds else 0.0
    return dg.MaterializeResult(
        metadata={
            "passages": stats.passages_total,
            "passages_embedded": stats.passages_embedded,
            "passages_from_fanout": staged.reused,  # vectors the fan-out's parts had embedded
            "passages_metadata_updated": stats.passages_metadata_updated,
            "passages_deleted": stats.passages_deleted,
            "papers": stats.papers_total,
            "papers_deleted": stats.papers_deleted,
            "vector_dimension": stats.dimension,
            "embedding_model": index_embedder.model_name,
            # what search compares its query model with (indexing/model_identity.py)
            "embedding_model_recorded": model_identity.of_schema(passages_table.schema).describe(),
            "embed_seconds": round(stats.embed_seconds, 2),
            "embed_passages_per_second": round(throughput, 1),
            "write_seconds": round(stats.write_seconds, 2),
            # evidence highlighting reads these instead of encoding sentences per request
            "sentences_embedded": stats.sentences_embedded,
            "sentence_seconds": round(stats.sentence_seconds, 2),
            **_sentence_cost(stats),
            "ann_index": stats.ann_index,
            "lancedb_uri": dg.MetadataValue.path(lancedb.resolved_uri())
            if "://" not in lancedb.resolved_uri()
            else "object storage",
            "table_versions": indexing.index_version(db),
            "held_batches": dg.MetadataValue.md(batch_holds.holds_markdown(holds, held_papers)),
            "held_papers": sum(held_papers[batch] for batch in holds),
            **neighbour_graph,
            "sample": dg.MetadataValue.md(tables.markdown_sample(sample, ["passage_id", "title", "text"])),
        },
        data_version=dg.DataVersion(indexing.index_version(db)),
    )


@dg.asset_check(
    asset=passage_index, description="The LanceDB passages table holds exactly the upstream passages."
)
def passage_index_row_count(
    context: dg.AssetCheckExecutionContext, lancedb: LanceDBResource
) -> dg.AssetCheckResult:
    passages, _ = indexable_upstream(context.instance)
    expected = passages["passage_id"].n_unique() if passages.height else 0
    table = indexing.open_table(lancedb.connect(), indexing.PASSAGES_TABLE)
    actual = table.count_rows() if table is not None else 0
    return dg.AssetCheckResult(passed=actual == expected, metadata={"expected": expected, "indexed": actual})


@dg.asset_check(asset=passage_index, description="Stored vectors have the embedding model's dimension.")
def passage_index_vector_dimension(
    lancedb: LanceDBResource, embedder: EmbedderResource
) -> dg.AssetCheckResult:
    expected = embedder.get_embedder().dimension
    table = indexing.open_table(lancedb.connect(), indexing.PASSAGES_TABLE)
    found = {} if table is None else {"passages.vector": table.schema.field("vector").type.list_size}
    passed = bool(found) and all(size == expected for size in found.values())
    return dg.AssetCheckResult(passed=passed, metadata={"model_dimension": expected, **found})


ASSETS = [passage_index]
CHECKS = [passage_index_row_count, passage_index_vector_dimension]


def build_resources() -> dict:
    return {"lancedb": LanceDBResource(), "embedder": EmbedderResource()}
