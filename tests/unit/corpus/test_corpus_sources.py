"""Contract tests of the OpenAlex and arXiv clients on recorded responses, the local loaders on real files,
and normalization / dedup on those real records."""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import unquote

import httpx
import pytest
from recorded import RecordingTransport, load_cassette

from lumina_assets.core import settings
from lumina_assets.core.http import HttpClient, HttpError
from lumina_assets.corpus.arxiv import ArxivClient, ArxivError, parse_feed
from lumina_assets.corpus.crawl import Seeds, crawl_arxiv, crawl_openalex, load_seeds
from lumina_assets.corpus.library import load_local_corpus
from lumina_assets.corpus.local import load_beir_papers, pdf_metadata
from lumina_assets.corpus.normalize import deduplicate, filter_papers, normalize
from lumina_assets.corpus.openalex import OpenAlexClient, rebuild_abstract, work_to_paper


def openalex_bodies(shared_data: Path) -> list[dict]:
    works = []
    for path in sorted((shared_data / "api_fixtures" / "openalex_extracted").glob("*.json")):
        body = json.loads(path.read_text())
        works += [w for w in body.get("results", [body]) if "id" in w]
    return works


def make_client(transport, tmp_path=None, **kw) -> HttpClient:
    return HttpClient(
        base_url="https://api.openalex.org",
        transport=transport,
        sleep=lambda s: None,
        cache_dir=tmp_path,
        **kw,
    )


# ------------------------------------------------------------------ OpenAlex


def test_openalex_work_record_normalizes(shared_data):
    works = {w["id"]: w for w in openalex_bodies(shared_data)}
    paper = work_to_paper(works["https://openalex.org/W2033425827"])
    assert paper.paper_id == "doi:10.1016/j.addr.2015.01.008"
    assert paper.openalex_id == "W2033425827" and paper.year == 2015
    assert paper.abstract.startswith("Pharmacokinetic properties of oligonucleotides")
    assert paper.authors[0] == "Richard S. Geary"
    assert len(paper.references) == 42 and all(r.startswith("openalex:W") for r in paper.references)


def test_abstract_rebuilt_in_word_order():
    assert (
        rebuild_abstract({"world": [1], "hello": [0], "again": [3], "hello ": [2]})
        == "hello world hello  again"
    )
    assert rebuild_abstract(None) is None


def test_openalex_cassette_lookup_by_doi_and_404_html(shared_data):
    cassettes = shared_data / "api_fixtures" / "paperqa_cassettes"
    found = next(
        i for i in load_cassette(cassettes / "test_doi_search[paper_attributes4].yaml") if "openalex" in i.uri
    )
    missing = load_cassette(cassettes / "test_does_openalex_work[not-in-openalex].yaml")[0]
    transport = RecordingTransport()
    transport.add_interaction(found, lambda r: "10.1073/pnas.1414271111" in unquote(str(r.url)))
    transport.add_interaction(missing, lambda r: "10.1046" in unquote(str(r.url)))
    client = OpenAlexClient(make_client(transport), api_key="test-key")
    work = client.work("https://doi.org/10.1073/pnas.1414271111")
    assert work_to_paper(work).doi == "10.1073/pnas.1414271111"
    assert client.work("10.1046/j.1365-2699.2003.00795") is None  # 404 with an HTML body is "not found"
    assert transport.calls[0].url.params["api_key"] == "test-key"


def _fake_openalex(shared_data: Path) -> tuple[RecordingTransport, list[dict]]:
    """Real OpenAlex work records; their reference lists are rewired to point at each other so a
    two-hop crawl can run offline (the linkage is constructed, the records are real)."""
    works = openalex_bodies(shared_data)
    ids = [w["id"] for w in works]
    works[0]["referenced_works"] = ids[1:4] + ["https://openalex.org/W999999"]
    works[1]["referenced_works"] = ids[4:6]
    by_id = {w["id"].rsplit("/", 1)[1]: w for w in works}
    by_doi = {w["doi"].lower().replace("https://doi.org/", ""): w for w in works if w.get("doi")}
    transport = RecordingTransport()

    def lookup(request):
        key = unquote(request.url.path).split("/works/", 1)[1]
        work = by_id.get(key) or by_doi.get(key.removeprefix("doi:").lower())
        return httpx.Response(200, json=work) if work else httpx.Response(404, text="<html>Not Found</html>")

    def listing(request):
        wanted = request.url.params["filter"].removeprefix("openalex_id:").split("|")
        results = [by_id[w] for w in wanted if w in by_id]
        return httpx.Response(
            200, json={"meta": {"count": len(results), "next_cursor": None}, "results": results}
        )

    transport.add(lambda r: r.url.path.startswith("/works/"), lookup)
    transport.add(lambda r: r.url.path == "/works", listing)
    return transport, works


def test_crawl_follows_references_breadth_first_and_reports_unknown_seeds(shared_data, tmp_path):
    transport, works = _fake_openalex(shared_data)
    seeds = Seeds(dois=[works[0]["doi"].replace("https://doi.org/", ""), "10.9999/does-not-exist"], depth=2)
    result = crawl_openalex(OpenAlexClient(make_client(transport, tmp_path)), seeds)
    depths = {p.openalex_id: p.crawl_depth for p in result.papers}
    assert depths[works[0]["id"].rsplit("/", 1)[1]] == 0
    assert [depths[w["id"].rsplit("/", 1)[1]] for w in works[1:4]] == [1, 1, 1]
    assert [depths[w["id"].rsplit("/", 1)[1]] for w in works[4:6]] == [2, 2]
    assert any("10.9999/does-not-exist" in f and "resolves to nothing" in f for f in result.failures)
    # the same crawl again is served from the response cache: no new request
    calls = len(transport.calls)
    again = crawl_openalex(OpenAlexClient(make_client(transport, tmp_path)), seeds)
    assert len(transport.calls) == calls and len(again.papers) == len(result.papers)


def test_crawl_respects_max_papers_and_depth(shared_data):
    transport, works = _fake_openalex(shared_data)
    seeds = Seeds(openalex_ids=[works[0]["id"]], depth=1, max_papers=3)
    result = crawl_openalex(OpenAlexClient(make_client(transport)), seeds)
    assert len(result.papers) == 3 and max(p.crawl_depth for p in result.papers) == 1


def test_crawl_survives_a_failing_page(shared_data):
    transport, works = _fake_openalex(shared_data)
    transport.routes.insert(
        0, (lambda r: r.url.path == "/works", lambda r: httpx.Response(200, content=b"{bad"))
    )
    seeds = Seeds(openalex_ids=[works[0]["id"]], depth=1)
    result = crawl_openalex(OpenAlexClient(make_client(transport)), seeds)
    assert len(result.papers) == 1  # the seed is kept
    assert any("malformed JSON" in f for f in result.failures)


# ------------------------------------------------------------------ arXiv


def test_arxiv_feed_with_doi_and_journal_ref(shared_data):
    page = parse_feed((shared_data / "api_fixtures/arxiv/zoia__arxiv_response.xml").read_text())
    (paper,) = page.papers
    assert paper.arxiv_id == "1601.00001" and paper.doi == "10.1063/1.4944470"
    assert paper.paper_id == "doi:10.1063/1.4944470"
    assert paper.title.startswith(
        "Inelastic effects in molecular transport junctions: The probe technique at"
    )
    assert paper.authors == ["Michael Kilgour", "Dvira Segal"] and paper.venue.startswith("J. Chem. Phys.")


def test_arxiv_search_pages_and_is_rate_limited(shared_data):
    feed = (shared_data / "api_fixtures/arxiv/xiv__arxiv_response.xml").read_text()
    transport = RecordingTransport().add(
        lambda r: r.url.path.endswith("/query"), lambda r: httpx.Response(200, text=feed)
    )
    sleeps = []
    http = HttpClient(
        base_url="https://export.arxiv.org/api", transport=transport, min_interval=3.0, sleep=sleeps.append
    )
    papers = list(ArxivClient(http).iter_search("cat:cs.RO AND neural", max_results=4, page_size=2))
    assert [p.arxiv_id for p in papers[:2]] == ["2510.14968", "2510.14827"]
    assert transport.calls[1].url.params["start"] == "2"
    assert sleeps and all(s <= 3.0 for s in sleeps)


def test_arxiv_bad_feed_is_a_clear_error():
    with pytest.raises(ArxivError, match="malformed Atom feed for id_list"):
        parse_feed("<feed><entry>", what="id_list=['1']")


def test_arxiv_seed_that_resolves_to_nothing_is_reported(shared_data):
    feed = (shared_data / "api_fixtures/arxiv/zoia__arxiv_response.xml").read_text()
    transport = RecordingTransport().add(lambda r: True, lambda r: httpx.Response(200, text=feed))
    http = HttpClient(base_url="https://export.arxiv.org/api", transport=transport, sleep=lambda s: None)
    result = crawl_arxiv(ArxivClient(http), Seeds(arxiv_ids=["1601.00001", "2101.99999"]))
    assert [p.arxiv_id for p in result.papers] == ["1601.00001"]
    assert any("2101.99999" in f for f in result.failures)


def test_arxiv_http_failure_is_recorded_not_raised():
    transport = RecordingTransport().add(lambda r: True, lambda r: httpx.Response(503))
    http = HttpClient(
        base_url="https://export.arxiv.org/api", transport=transport, sleep=lambda s: None, max_retries=1
    )
    result = crawl_arxiv(ArxivClient(http), Seeds(arxiv_ids=["1601.00001"]))
    assert result.papers == [] and "HTTP 503" in result.failures[0]


# ------------------------------------------------------------------ seeds and local corpora


def test_seed_file_problems_are_named(tmp_path):
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    assert "is empty" in load_seeds(empty).problems[0]
    bad = tmp_path / "bad.yaml"
    bad.write_text("dois: ['not-a-doi', '10.1/x']\narxiv_ids: ['2304.02623v1']\n")
    seeds = load_seeds(bad)
    assert seeds.dois == ["10.1/x"] and seeds.arxiv_ids == ["2304.02623"]
    assert any("not-a-doi" in p for p in seeds.problems)


def test_project_seed_file_is_valid():
    seeds = load_seeds(settings.PROJECT_ROOT / "data" / "seeds.yaml")
    assert seeds.problems == [] and seeds.dois and seeds.arxiv_ids


def test_beir_loader_reads_all_of_scifact(shared_data):
    report = load_beir_papers(shared_data / "scifact")
    assert len(report.papers) == 5183 and report.errors == []
    first = report.papers[0]
    assert first.paper_id.startswith("beir-scifact:") and first.source == "beir" and first.abstract


def test_beir_line_that_is_not_json_is_reported_by_line(shared_data, tmp_path):
    lines = (shared_data / "scifact" / "corpus.jsonl").read_text().splitlines()[:5]
    corpus = tmp_path / "mini"
    corpus.mkdir()
    (corpus / "corpus.jsonl").write_text(
        "\n".join([lines[0], '{"_id": "x", "title": ', lines[1], '{"title": "no id"}'])
    )
    report = load_local_corpus(corpus)
    assert len(report.papers) == 2
    assert report.errors == ["corpus.jsonl line 2: not JSON (Expecting value)", "corpus.jsonl line 4: no _id"]


def test_pdf_folder_metadata_from_real_pdfs(shared_data):
    report = load_local_corpus(shared_data / "pdfs")
    assert report.errors == [] and len(report.papers) == 7
    by_file = {p.source_id: p for p in report.papers}
    assert by_file["2304.02623v1.pdf"].paper_id == "arxiv:2304.02623"
    specter = by_file["2020.acl-main.207.pdf"]
    assert "SPECTER" in specter.title and specter.local_path.endswith("2020.acl-main.207.pdf")
    assert "Semantic Scholar" in by_file["N18-3011.pdf"].title
    assert sum(1 for p in report.papers if p.abstract) >= 5


def test_non_pdf_file_is_a_named_failure(tmp_path):
    fake = tmp_path / "notes.pdf"
    fake.write_text("this is not a pdf")
    with pytest.raises(ValueError, match="notes.pdf"):
        pdf_metadata(fake)
    assert load_local_corpus(tmp_path).errors


def test_missing_corpus_path_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_local_corpus(tmp_path / "nowhere")


# ------------------------------------------------------------------ normalization


def test_dedup_merges_arxiv_preprint_with_journal_version_by_title_and_first_author(shared_data):
    """Real records: 'Augmenting large language models with chemistry tools' as arXiv preprint and Nature MI paper."""
    works = [w for w in openalex_bodies(shared_data) if "chemistry tools" in (w.get("title") or "").lower()]
    papers = [work_to_paper(w) for w in works]
    assert len({p.paper_id for p in papers}) == 2
    result = deduplicate(papers)
    assert len(result.papers) == 1
    assert result.rejected[0].reason == "duplicate_title_author"
    merged = result.papers[0]
    assert merged.doi and merged.arxiv_id == "2304.05376"


def test_dedup_by_doi_across_sources_keeps_the_union_of_facts(shared_data):
    feed = parse_feed((shared_data / "api_fixtures/arxiv/zoia__arxiv_response.xml").read_text()).papers[0]
    twin = work_to_paper(openalex_bodies(shared_data)[0])
    twin.doi, twin.arxiv_id, twin.pdf_urls = feed.doi, None, ["https://example.org/a.pdf"]
    result = deduplicate([twin, feed])
    assert len(result.papers) == 1 and result.rejected[0].reason == "duplicate_doi"
    assert set(result.papers[0].pdf_urls) == {"https://example.org/a.pdf", *feed.pdf_urls}
    assert result.papers[0].source == "openalex,arxiv"


def test_filters_drop_other_languages_and_abstractless_records(shared_data):
    papers = [work_to_paper(w) for w in openalex_bodies(shared_data)]
    no_abstract = [p for p in papers if not p.abstract and not p.pdf_urls]
    german = papers[2]
    german.language = None
    german.abstract = (
        "Die Pharmakokinetik von Antisense-Oligonukleotiden wird weitgehend durch die Chemie des "
        "Rückgrats bestimmt und ist zwischen den Sequenzen sehr ähnlich."
    )
    result = filter_papers(papers)
    reasons = {r.paper_id: r.reason for r in result.rejected}
    assert reasons[german.paper_id] == "language_de"
    assert all(reasons[p.paper_id] == "missing_abstract" for p in no_abstract) and no_abstract


def test_normalize_is_idempotent_on_ids(shared_data):
    papers = [work_to_paper(w) for w in openalex_bodies(shared_data)]
    first = normalize(papers)
    second = normalize(papers)
    assert [p.paper_id for p in first.papers] == [p.paper_id for p in second.papers]
    assert all(re.match(r"^(doi|arxiv|openalex):", p.paper_id) for p in first.papers)


def test_openalex_http_error_other_than_404_propagates(shared_data):
    transport = RecordingTransport().add(lambda r: True, lambda r: httpx.Response(500))
    client = OpenAlexClient(make_client(transport, max_retries=0))
    with pytest.raises(HttpError, match="HTTP 500"):
        client.work("W2033425827")
