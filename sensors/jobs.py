"""Named jobs, one per asset group split where the partitioning changes, so every run reads as its stage on the Runs
page instead of `__ephemeral_asset_job__`."""

from __future__ import annotations

import dagster as dg

parse_job = dg.define_asset_job(
    name="parse_batch",
    selection=dg.AssetSelection.groups("parsing"),
    description="Fetch, parse and cut one ingest batch into passages (pdf_files → parsed_papers → passages).",
    tags={"lumina/job": "parse"},
)

index_job = dg.define_asset_job(
    name="index_passages",
    selection=dg.AssetSelection.groups("index"),
    description="Embed new or changed passages into LanceDB and drop the passages of removed papers.",
    tags={"lumina/job": "index"},
)

benchmark_questions_job = dg.define_asset_job(
    name="benchmark_questions",
    selection=dg.AssetSelection.assets("synthetic_questions", "user_queries", "questions"),
    description="The benchmark's questions: synthetic ones from passages, user queries, BEIR queries.",
    tags={"lumina/job": "benchmark"},
)

benchmark_providers_job = dg.define_asset_job(
    name="benchmark_providers",
    selection=dg.AssetSelection.assets("provider_results", "recursive_results", "judgments"),
    description="One provider × shard of questions (the partition): zero-shot results, recursive levels and "
    "judgments.",
    tags={"lumina/job": "benchmark"},
)

benchmark_scoring_job = dg.define_asset_job(
    name="benchmark_scoring",
    selection=dg.AssetSelection.assets("benchmark_scores", "benchmark_report"),
    description="Scores over every provider's judgments and the report.",
    tags={"lumina/job": "benchmark"},
)

curate_catalogue_job = dg.define_asset_job(
    name="curate_catalogue",
    # staged_passage_vectors with passage_index: left out, its eager condition would index a second time
    selection=dg.AssetSelection.assets("papers", "citation_graph", "staged_passage_vectors", "passage_index"),
    description="Explicit removals (`lumina remove` / `lumina prune` / `lumina restore`): papers with its run "
    "config, then the citation graph and the index follow the catalogue.",
    tags={"lumina/job": "curate"},
)

crawl_job = dg.define_asset_job(
    name="crawl_corpus",
    selection=dg.AssetSelection.groups("corpus"),
    description="Crawl the seeds (OpenAlex, arXiv, local folder / inbox) into the papers table.",
    tags={"lumina/job": "crawl"},
)

benchmark_job = dg.define_asset_job(
    name="run_benchmark",
    selection=dg.AssetSelection.groups("benchmark"),
    description="Questions, provider results, judgments, scores and the report.",
    tags={"lumina/job": "benchmark"},
)

ingest_inbox_job = dg.define_asset_job(
    name="ingest_inbox",
    selection=dg.AssetSelection.assets("local_papers", "papers"),
    description="Pick up PDFs from the inbox by hand (the inbox sensor does the same on its own).",
    tags={"lumina/job": "ingest"},
)


JOBS = [
    parse_job,
    index_job,
    benchmark_questions_job,
    benchmark_providers_job,
    benchmark_scoring_job,
    curate_catalogue_job,
    crawl_job,
    benchmark_job,
    ingest_inbox_job,
]
