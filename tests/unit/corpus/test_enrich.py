"""A local PDF's record enriched by the DOI it prints, against a recorded OpenAlex body (api_fixtures), and by its
arXiv id against a recorded arXiv feed; offline the PDF's own fields stand."""

from __future__ import annotations

import dataclasses
import json

import httpx
from recorded import RecordingTransport

from lumina_assets.core.http import HttpClient
from lumina_assets.core.schemas import Paper
from lumina_assets.corpus.arxiv import ArxivClient
from lumina_assets.corpus.enrich import enrich_paper, sources_of
from lumina_assets.corpus.openalex import OpenAlexClient

DOI = "10.1016/j.xgen.2025.100814"


def _local_record(**fields) -> Paper:
    """What corpus.local makes of a PDF that prints its DOI but whose first page yields one author only."""
    base = dict(
        paper_id=f"doi:{DOI}",
        title="High-throughput screening of human genetic variants by pooled prime editing",
        doi=DOI,
        authors=["Michael Herger"],
        year=2024,
        source="local_pdf",
        metadata_sources=["title:pdf_info", "authors:pdf_text", "doi:pdf_text", "year:pdf_info_date"],
    )
    return Paper(**{**base, **fields})


def _openalex(shared_data, tmp_path) -> tuple[OpenAlexClient, RecordingTransport]:
    body = (
        shared_data
        / "api_fixtures"
        / "openalex_extracted"
        / "test_doi_search_paper_attributes0__interaction2.json"
    ).read_text()
    transport = RecordingTransport()
    transport.add(
        lambda r: r.url.path == f"/works/doi:{DOI}", lambda r: httpx.Response(200, content=body.encode())
    )
    http = HttpClient(
        base_url="https://api.openalex.org", transport=transport, sleep=lambda s: None, cache_dir=tmp_path
    )
    return OpenAlexClient(http, api_key="k"), transport


def test_enrichment_by_doi_from_recorded_openalex_body(shared_data, tmp_path):
    work = json.loads(
        (
            shared_data
            / "api_fixtures"
            / "openalex_extracted"
            / "test_doi_search_paper_attributes0__interaction2.json"
        ).read_text()
    )
    client, transport = _openalex(shared_data, tmp_path)
    enriched = enrich_paper(_local_record(), openalex=client)
    assert len(transport.calls) == 1
    assert enriched.authors == [a["author"]["display_name"] for a in work["authorships"]]
    assert len(enriched.authors) > 1
    assert enriched.venue == "Cell Genomics" and enriched.year == 2025
    assert enriched.openalex_id == work["id"].rsplit("/", 1)[-1]
    sources = sources_of(enriched)
    assert sources["authors"] == sources["venue"] == sources["year"] == "openalex_enriched"
    assert sources["title"] == "openalex_enriched" and sources["doi"] == "openalex_enriched"
    # a second lookup is served from the HTTP cache: no new request
    again, second_transport = _openalex(shared_data, tmp_path)
    assert enrich_paper(_local_record(), openalex=again) == enriched and not second_transport.calls


def test_library_fields_are_kept_and_grobid_fields_give_way(shared_data, tmp_path):
    client, _ = _openalex(shared_data, tmp_path)
    record = _local_record(
        authors=["M. Herger", "C. Kajba"], metadata_sources=["authors:library", "year:grobid", "doi:pdf_text"]
    )
    enriched = enrich_paper(record, openalex=client)
    assert enriched.authors == ["M. Herger", "C. Kajba"] and sources_of(enriched)["authors"] == "library"
    assert (
        enriched.year == 2025 and sources_of(enriched)["year"] == "openalex_enriched"
    )  # API by DOI > GROBID
    assert enriched.venue == "Cell Genomics"


def test_offline_the_pdf_fields_stand(tmp_path):
    def refuse(request):
        raise httpx.ConnectError("no network", request=request)

    http = HttpClient(
        base_url="https://api.openalex.org",
        transport=httpx.MockTransport(refuse),
        sleep=lambda s: None,
        cache_dir=tmp_path,
    )
    record = _local_record()
    assert enrich_paper(record, openalex=OpenAlexClient(http)) == record


def test_enrichment_by_arxiv_id_from_recorded_feed(shared_data, tmp_path):
    feed = (shared_data / "api_fixtures" / "arxiv" / "zoia__arxiv_response.xml").read_bytes()
    transport = RecordingTransport()
    transport.add(lambda r: "1601.00001" in str(r.url), lambda r: httpx.Response(200, content=feed))
    http = HttpClient(
        base_url="https://export.arxiv.org/api", transport=transport, sleep=lambda s: None, cache_dir=tmp_path
    )
    record = Paper(
        paper_id="arxiv:1601.00001",
        title="x",
        arxiv_id="1601.00001",
        source="local_pdf",
        metadata_sources=["title:file_name", "arxiv_id:file_name"],
    )
    enriched = enrich_paper(record, arxiv=ArxivClient(http))
    assert enriched.title != "x" and enriched.authors
    assert sources_of(enriched)["title"] == "arxiv_enriched"


def test_the_folder_loader_passes_each_record_through_the_enricher(shared_data):
    from lumina_assets.corpus.library import load_local_corpus

    seen = []

    def enricher(paper):
        seen.append(paper.source_id)
        return dataclasses.replace(paper, metadata_sources=[*paper.metadata_sources, "venue:test_enriched"])

    report = load_local_corpus(shared_data / "pdfs" / "N18-3011.pdf", enricher=enricher)
    assert seen == ["N18-3011.pdf"] and "venue:test_enriched" in report.papers[0].metadata_sources
