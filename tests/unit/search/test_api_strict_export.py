"""The search API's strictness and its exports: every bad input a 4xx with a message and no traceback (lone
surrogates in a body or a query string, wrong types, unknown papers, unknown export formats); `GET /api/export` and
`lumina export` writing BibTeX, RIS and CSV that parse back (bibtexparser, rispy, csv) with the papers' metadata;
sort by date, in-corpus cited-by counts and named PDF links in the results. On a small index built with the
deterministic hashing embedder (plumbing, not model quality)."""

from __future__ import annotations

import csv
import io
import logging

import polars as pl
import pytest
from hashing_embedder import HashingEmbedder
from starlette.testclient import TestClient

from lumina_assets.core import tables
from lumina_assets.core.schemas import PASSAGE_SCHEMA, rows_to_table
from lumina_assets.indexing import lancedb_tables as indexing
from lumina_assets.indexing.connection import connect_lancedb
from lumina_assets.parsing.chunking import passages_for_paper
from lumina_assets.search.api import create_app
from lumina_assets.search.citation_export import citation_keys, to_bibtex, to_csv, to_ris
from lumina_assets.search.config import SearchConfig
from lumina_assets.search.engine import SearchEngine
from lumina_assets.search.request import BadRequest, SearchRequest
from lumina_assets.search.results import SearchService

PAPERS = [
    (
        "Citation graphs train SciBERT embeddings",
        "Citations train document embeddings. A cited paper is a positive.",
    ),
    (
        "Citation recommendation & 100% recall",
        "A graph network over citations recommends references to cite.",
    ),
    ("Protein folding with attention", "Attention layers predict residue contacts in proteins."),
    (
        "Citation intent in Müller's corpus",
        "We classify why a paper cites another: background, method, result.",
    ),
    ("Venue prediction from abstracts", "The venue of a paper is predicted from its abstract text."),
]
YEARS = [2015, 2021, 2018, 2023, 2012]
AUTHORS = [
    ["Jürgen Müller", "Ana O'Brien"],
    ["Zoë SStraße"],
    ["Li Wei"],
    ["Bill and Melinda Gates Foundation"],
    [],
]
VENUES = ["Proceedings of ACL", "Nature", None, "J. Informetrics", "arXiv"]


@pytest.fixture(scope="module")
def index_uri(tmp_path_factory):
    uri = str(tmp_path_factory.mktemp("strict") / "lancedb")
    papers, passages = [], []
    for number, (title, abstract) in enumerate(PAPERS):
        paper_id = f"doi:10.5/s{number}"
        papers.append(
            {
                "paper_id": paper_id,
                "title": title,
                "abstract": abstract,
                "doi": f"10.5/s{number}_x%y" if number == 0 else f"10.5/s{number}",
                "url": "https://example.org/paper?id=1&x=%20" if number == 0 else None,
                "year": YEARS[number],
                "authors": AUTHORS[number],
                "venue": VENUES[number],
                "source": "test",
            }
        )
        passages += [p.to_row() for p in passages_for_paper(paper_id, title=title, abstract=abstract)]
    frame = pl.from_arrow(rows_to_table(passages, PASSAGE_SCHEMA))
    indexing.index_corpus(connect_lancedb(uri), frame, pl.DataFrame(papers), HashingEmbedder())
    return uri


@pytest.fixture()
def service(index_uri, data_dir):
    # s0 is cited by s1 and s3 (and cites itself: not counted), s1 by s3
    tables.write(
        tables.CITATION_EDGES,
        pl.DataFrame(
            {
                "citing": ["doi:10.5/s1", "doi:10.5/s3", "doi:10.5/s3", "doi:10.5/s0"],
                "cited": ["doi:10.5/s0", "doi:10.5/s0", "doi:10.5/s1", "doi:10.5/s0"],
            }
        ),
    )
    embedder = HashingEmbedder()
    return SearchService(lambda: SearchEngine(index_uri, embedder, SearchConfig()), pool_size=1)


@pytest.fixture()
def http(service):
    return TestClient(create_app(service), base_url="http://127.0.0.1:8765")


def _no_traceback(caplog) -> None:
    assert "Traceback" not in caplog.text and not any(r.exc_info for r in caplog.records)


# ---------------------------------------------------------------- strictness


@pytest.mark.parametrize(
    "body, fragment",
    [
        ({"query": "citation", "k": "5"}, "k must be an integer"),
        ({"query": "citation", "k": 2.5}, "k must be an integer"),
        ({"query": "citation", "k": 5.0}, "k must be an integer"),
        ({"query": "citation", "k": True}, "k must be an integer"),
        ({"query": "citation", "page": "2"}, "page must be an integer"),
        ({"query": "citation", "year_min": "2019"}, "year_min must be an integer"),
        ({"query": "citation", "overview": "yes"}, "overview must be a boolean"),
        ({"query": "citation", "overview": 1}, "overview must be a boolean"),
        ({"query": "citation", "widen": "false"}, "widen must be a boolean"),
        ({"query": "citation", "sort": "newest"}, "sort must be one of"),
        ({"query": "citation", "author": 7}, "author must be a string"),
        ([1, 2], "JSON object"),
    ],
)
def test_json_types_are_strict(http, caplog, body, fragment):
    """Before: `k: "5"` and `overview: "yes"` were accepted while `k: 2.5` was refused."""
    with caplog.at_level(logging.DEBUG):
        response = http.post("/api/search", json=body)
    assert response.status_code == 422, response.text
    assert fragment in response.json()["error"]
    _no_traceback(caplog)


@pytest.mark.parametrize(
    "params, fragment",
    [
        ({"q": "citation", "k": "2.5"}, "k must be an integer"),
        ({"q": "citation", "k": "5e1"}, "k must be an integer"),
        ({"q": "citation", "overview": "yes"}, "overview must be a boolean"),
        ({"q": "citation", "sort": "random"}, "sort must be one of"),
        ({"q": "citation", "year_min": "soon"}, "year_min must be an integer"),
    ],
)
def test_query_string_values_are_read_strictly(http, params, fragment):
    response = http.get("/api/search", params=params)
    assert response.status_code == 422 and fragment in response.json()["error"], response.text


def test_query_string_integers_and_flags_in_their_text_form_pass(http):
    answer = http.get("/api/search", params={"q": "citation", "k": "3", "overview": "false", "sort": "date"})
    assert answer.status_code == 200, answer.text
    data = answer.json()
    assert data["k"] == 3 and data["overview"] is None and data["sort"] == "date"


@pytest.mark.parametrize(
    "send",
    [
        lambda h: h.post(
            "/api/search", content=b'{"query": "\\ud800"}', headers={"content-type": "application/json"}
        ),
        lambda h: h.post(
            "/api/search",
            content=b'{"query": "ok", "venue": "\\udc00x"}',
            headers={"content-type": "application/json"},
        ),
        lambda h: h.get("/api/search?q=cells%ED%A0%80here"),
        lambda h: h.get("/api/search?q=citation&author=%ED%B0%80"),
        lambda h: h.get("/api/export?q=%ED%A0%80&format=ris"),
        lambda h: h.get("/api/search?q=%FF%FE"),
    ],
)
def test_lone_surrogates_and_bad_utf8_are_400_without_a_traceback(http, caplog, send):
    """Before: a lone surrogate could reach the engine (a 503 with an internal TypeError, a logged traceback);
    in a query string Starlette substituted U+FFFD and searched for it."""
    with caplog.at_level(logging.DEBUG):
        response = send(http)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert "surrogate" in error or "UTF-8" in error
    _no_traceback(caplog)


def test_citations_of_an_unknown_paper_are_404(http):
    """Before: 200 with empty lists."""
    missing = http.get("/api/papers/doi:10.5/nope/citations")
    assert missing.status_code == 404 and "no paper" in missing.json()["error"]
    known = http.get("/api/papers/doi:10.5/s0/citations")
    assert known.status_code == 200
    assert sorted(c["paper_id"] for c in known.json()["cited_by"]) == [
        "doi:10.5/s0",
        "doi:10.5/s1",
        "doi:10.5/s3",
    ]
    # a paper with no links is known all the same: 200 with empty lists
    alone = http.get("/api/papers/doi:10.5/s4/citations")
    assert alone.status_code == 200 and alone.json()["cites"] == [] and alone.json()["cited_by"] == []


def test_request_validation_without_http():
    assert SearchRequest.from_mapping({"q": "x", "k": "7", "widen": "1"}, from_query=True).k == 7
    with pytest.raises(BadRequest, match="k must be an integer"):
        SearchRequest.from_mapping({"q": "x", "k": "7"})
    filtered = SearchRequest.from_mapping({"q": "x", "year_min": 2019, "venue": "ACL"})
    assert (filtered.year_min, filtered.year_max, filtered.venue) == (2019, None, "ACL")


# ---------------------------------------------------------------- results: cited by, sort by date, PDF names


def test_results_carry_cited_by_counts_and_sort_by_date(http):
    relevance = http.post("/api/search", json={"query": "citation", "k": 5, "overview": False}).json()
    counts = {r["paper_id"]: r["cited_by_count"] for r in relevance["results"]}
    assert counts.get("doi:10.5/s0") == 2 and counts.get("doi:10.5/s1") == 1  # a self-citation is not counted
    assert all(v == 0 for p, v in counts.items() if p not in ("doi:10.5/s0", "doi:10.5/s1"))
    by_date = http.post(
        "/api/search", json={"query": "citation", "k": 5, "overview": False, "sort": "date"}
    ).json()
    years = [r["year"] for r in by_date["results"]]
    assert years == sorted(years, reverse=True) and len(years) >= 3
    assert years != [r["year"] for r in relevance["results"]]  # the order really changed
    assert {r["paper_id"] for r in by_date["results"]} == {r["paper_id"] for r in relevance["results"]}
    page2 = http.post("/api/search", json={"query": "citation", "k": 2, "page": 2, "sort": "date"}).json()
    assert [r["year"] for r in page2["results"]] == years[2:4] and page2["results"][0]["rank"] == 3


def test_pdf_links_carry_the_paper_title_as_their_name(http, service, shared_data, monkeypatch):
    from lumina_assets.parsing.pdf_store import PdfStore

    stored = PdfStore().put_file(shared_data / "pdfs" / "pasa.pdf")
    monkeypatch.setattr(service.files, "pdf_hashes", lambda ids: {p: stored.sha256 for p in ids})
    result = http.post("/api/search", json={"query": "protein folding attention", "k": 1}).json()["results"][
        0
    ]
    assert result["pdf"] == f"/pdf/{stored.sha256}/Protein-folding-with-attention.pdf"
    served = http.get(result["pdf"])
    assert served.status_code == 200 and served.content[:5] == b"%PDF-"
    assert served.headers["content-disposition"].startswith("inline")
    assert 'filename="Protein-folding-with-attention.pdf"' in served.headers["content-disposition"]
    assert http.get(f"/pdf/{stored.sha256}/..%2F..%2Fetc.pdf").status_code == 404
    assert http.get(f"/pdf/{stored.sha256}/x.html").status_code == 404


# ---------------------------------------------------------------- exports


def _results(service, query="citation", k=5) -> list[dict]:
    return service.search(SearchRequest(query, k=k, overview=False))["results"]


def test_bibtex_parses_back_with_escapes_authors_and_verbatim_doi(service):
    import bibtexparser
    from bibtexparser.middlewares import LatexDecodingMiddleware, SeparateCoAuthors
    from pylatexenc.latex2text import LatexNodes2Text

    def names(entry) -> list[str]:  # split at top-level " and " first, then each name decoded
        return [LatexNodes2Text().latex_to_text(n) for n in entry["author"]]

    results = _results(service)
    text = to_bibtex(results)
    assert 'M\\"uller' in text and "\\&" in text and "\\%" in text and "{SciBERT}" in text
    library = bibtexparser.parse_string(
        text, append_middleware=[SeparateCoAuthors(), LatexDecodingMiddleware()]
    )
    assert not library.failed_blocks
    entries = {e.key: e for e in library.entries}
    assert list(entries) == citation_keys(results) and len(entries) == len(results)
    by_id = {r["paper_id"]: r for r in results}
    assert "%" in by_id["doi:10.5/s0"]["url"]  # written as \\%, read back as %
    first = entries["muller2015citation"]
    assert first.entry_type == "inproceedings" and first["booktitle"] == "Proceedings of ACL"
    assert names(first) == ["Müller, Jürgen", "O'Brien, Ana"]
    assert first["title"].replace("{", "").replace("}", "") == by_id["doi:10.5/s0"]["title"].replace(
        "{", ""
    ).replace("}", "")
    assert first["doi"] == "10.5/s0_x%y" and first["url"] == by_id["doi:10.5/s0"]["url"]
    assert first["year"] == "2015"
    foundation = next(e for e in library.entries if "Foundation" in str(e.get("author").value))
    assert foundation["author"] == ["{Bill and Melinda Gates Foundation}"]  # one author, not three
    recall = next(e for e in library.entries if "recall" in e["title"])
    assert recall["title"] == "Citation recommendation & 100% recall" and names(recall) == ["SStraße, Zoë"]


def test_citation_keys_are_stable_and_distinct():
    a = {"paper_id": "p1", "title": "The deep model", "authors": ["Ann Smith"], "year": 2020}
    b = {"paper_id": "p2", "title": "Deep nets", "authors": ["Bob Smith"], "year": 2020}
    c = {"paper_id": "p3", "title": "Other", "authors": [], "year": None}
    alone = citation_keys([a, c])
    assert alone == ["smith2020deep", "anonother"]
    together = citation_keys([b, a, c])
    assert len(set(together)) == 3 and together[0].startswith("smith2020deep_")
    assert citation_keys([a, b, c]) == [together[1], together[0], together[2]]  # order does not change keys


def test_ris_and_csv_parse_back(service):
    import rispy

    results = _results(service)
    records = rispy.loads(to_ris(results))
    results_by_id = {r["paper_id"]: r for r in results}
    assert "%" in results_by_id["doi:10.5/s0"]["url"]
    assert [r["id"] for r in records] == citation_keys(results)
    by_title = {r["title"]: r for r in records}
    first = by_title["Citation graphs train SciBERT embeddings"]
    assert first["type_of_reference"] == "CPAPER" and first["authors"] == ["Müller, Jürgen", "O'Brien, Ana"]
    assert (
        first["year"] == "2015"
        and first["doi"] == "10.5/s0_x%y"
        and first["secondary_title"] == "Proceedings of ACL"
    )
    assert first["urls"] == [results_by_id["doi:10.5/s0"]["url"]] and first["notes"][0].startswith("Evidence")
    rows = list(csv.DictReader(io.StringIO(to_csv(results))))
    assert [r["paper_id"] for r in rows] == [r["paper_id"] for r in results]
    row = next(r for r in rows if r["paper_id"] == "doi:10.5/s0")
    assert (
        row["authors"] == "Jürgen Müller; Ana O'Brien"
        and row["year"] == "2015"
        and row["cited_by_in_corpus"] == "2"
    )
    source = next(r for r in results if r["paper_id"] == "doi:10.5/s0")
    assert row["evidence"] and any(row["evidence"] in " ".join(p["text"].split()) for p in source["passages"])


def test_csv_neutralises_formulas_and_folds_newlines():
    rows = list(
        csv.DictReader(
            io.StringIO(
                to_csv([{"paper_id": "p", "title": '=HYPERLINK("x")\nline', "authors": ["@evil"], "rank": 1}])
            )
        )
    )
    assert rows[0]["title"] == '\'=HYPERLINK("x") line' and rows[0]["authors"] == "'@evil"


@pytest.mark.parametrize(
    "fmt, media, parse",
    [
        ("bibtex", "application/x-bibtex", lambda t: len(__import__("bibtexparser").parse_string(t).entries)),
        ("ris", "application/x-research-info-systems", lambda t: len(__import__("rispy").loads(t))),
        ("csv", "text/csv", lambda t: len(list(csv.DictReader(io.StringIO(t))))),
    ],
)
def test_export_endpoint_returns_a_named_file(http, fmt, media, parse):
    response = http.get("/api/export", params={"q": "citation recommendation", "format": fmt, "k": "3"})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith(media)
    extension = {"bibtex": "bib", "ris": "ris", "csv": "csv"}[fmt]
    assert response.headers["content-disposition"] == (
        f'attachment; filename="lumina-citation-recommendation.{extension}"'
    )
    assert parse(response.text) == int(response.headers["x-result-count"]) == 3


def test_export_endpoint_applies_the_search_filters_and_refuses_bad_input(http):
    filtered = http.get("/api/export", params={"q": "citation", "format": "csv", "year_min": "2020"})
    rows = list(csv.DictReader(io.StringIO(filtered.text)))
    assert rows and all(int(r["year"]) >= 2020 for r in rows)
    unknown = http.get("/api/export", params={"q": "citation", "format": "docx"})
    assert unknown.status_code == 422 and "format must be one of" in unknown.json()["error"]
    assert http.get("/api/export", params={"format": "ris"}).status_code == 422
    assert http.get("/api/export", params={"q": "x", "k": "many"}).status_code == 422
    assert http.post("/api/export", json={"query": "x"}).status_code == 405


def test_lumina_export_command(index_uri, service, tmp_path, capsys, monkeypatch):
    import rispy

    from lumina_assets.cli.main import main
    from lumina_assets.search import engine as engine_module

    embedder = HashingEmbedder()  # the index's model (the command would load MiniLM)
    monkeypatch.setattr(
        engine_module,
        "SearchEngine",
        lambda uri, config=None, **options: SearchEngine(uri, embedder, config or SearchConfig(), **options),
    )

    out = tmp_path / "refs.ris"
    assert main(["export", "citation", "--format", "ris", "-o", str(out), "-k", "2", "--db", index_uri]) == 0
    assert len(rispy.loads(out.read_text(encoding="utf-8"))) == 2
    assert "2 results written" in capsys.readouterr().err
    assert main(["export", "citation", "--format", "csv", "--sort", "date", "--db", index_uri]) == 0
    years = [int(r["year"]) for r in csv.DictReader(io.StringIO(capsys.readouterr().out)) if r["year"]]
    assert years == sorted(years, reverse=True) and years
    assert main(["export", "citation", "-k", "0", "--db", index_uri]) == 2
    assert "k must be between" in capsys.readouterr().err
    assert main(["export", "citation", "--db", str(tmp_path / "no-index")]) == 2
    assert "make demo" in capsys.readouterr().err


def test_one_paper_citation_for_copy_bibtex(http):
    import bibtexparser

    response = http.get("/api/papers/doi:10.5/s1/export", params={"format": "bibtex"})
    assert response.status_code == 200 and response.headers["content-type"].startswith("application/x-bibtex")
    entries = bibtexparser.parse_string(response.text).entries
    assert len(entries) == 1 and entries[0].key == "sstrae2021citation" and entries[0]["year"] == "2021"
    assert http.get("/api/papers/doi:10.5/nope/export").status_code == 404
    assert http.get("/api/papers/doi:10.5/s1/export", params={"format": "pdf"}).status_code == 422


def test_a_lone_surrogate_from_the_command_line_is_refused(index_uri, capsys):
    """A command-line argument that is not UTF-8 reaches Python surrogate-escaped (`\\udcff`): refused with a
    message before the engine sees it."""
    from lumina_assets.cli.main import main

    assert main(["export", "cells \udcff here", "--db", index_uri]) == 2
    assert "lone surrogate" in capsys.readouterr().err
    with pytest.raises(BadRequest, match="author holds a lone surrogate"):
        SearchRequest.from_mapping({"query": "x", "author": "\ud800"})


def test_entry_types_follow_the_venue():
    import bibtexparser
    import rispy

    papers = [
        {"paper_id": "a", "title": "One", "year": 2020, "venue": "Proceedings of EMNLP", "authors": ["A B"]},
        {"paper_id": "b", "title": "Two", "year": 2021, "venue": "Nature Medicine", "authors": ["C D"]},
        {"paper_id": "c", "title": "Three", "year": 2025, "venue": "arXiv", "authors": ["E F"]},
        {"paper_id": "d", "title": "Four", "year": None, "venue": None, "authors": []},
    ]
    entries = bibtexparser.parse_string(to_bibtex(papers)).entries
    assert [e.entry_type for e in entries] == ["inproceedings", "article", "misc", "misc"]
    assert entries[0]["booktitle"] == "Proceedings of EMNLP" and entries[1]["journal"] == "Nature Medicine"
    assert entries[2]["howpublished"] == "arXiv"
    records = rispy.loads(to_ris(papers))
    assert [r["type_of_reference"] for r in records] == ["CPAPER", "JOUR", "UNPB", "GEN"]
    assert records[1]["journal_name"] == "Nature Medicine" and records[2]["secondary_title"] == "arXiv"
