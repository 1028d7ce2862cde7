"""The TEI parser against s2orc-doc2json's reading of the same GROBID output, and the GROBID client path end to
end against a local HTTP server that answers like GROBID with the real TEI."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from lumina_assets.core.schemas import Element, ParsedPaper
from lumina_assets.parsing.base import ParseFailure, ParserUnavailable
from lumina_assets.parsing.grobid_parser import GrobidParser
from lumina_assets.parsing.parsers import CombinedParser, get_parser, merge_tables
from lumina_assets.parsing.tei import parse_tei

DOC2JSON = ["N18-3011", "2020.acl-main.207"]


def _tei(shared_data, name: str) -> bytes:
    return (shared_data / "grobid_tei" / f"{name}.tei.xml").read_bytes()


def _doc2json(shared_data, name: str) -> dict:
    return json.loads((shared_data / "doc2json_expected" / f"{name}.json").read_text())["pdf_parse"]


@pytest.mark.parametrize("name", DOC2JSON)
def test_tei_sections_match_doc2json(shared_data, name):
    paper = parse_tei(_tei(shared_data, name), name)
    expected = _doc2json(shared_data, name)
    body_titles = []
    for paragraph in expected["body_text"]:
        if paragraph["section"] and paragraph["section"] not in body_titles:
            body_titles.append(paragraph["section"])
    back_titles = {p["section"] for p in expected["back_matter"] if p["section"] != "annex"}
    ours = [s.title for s in paper.sections]
    assert [t for t in ours if t not in back_titles] == body_titles
    numbered = {p["section"]: p["sec_num"] for p in expected["body_text"] if p["sec_num"]}
    for section in paper.sections:
        if section.title in numbered:
            assert section.number == numbered[section.title].rstrip(".") or section.number.startswith(
                numbered[section.title].rstrip(".") + "-"
            )
    assert paper.abstract.startswith(expected["abstract"][0]["text"][:80])


@pytest.mark.parametrize("name", DOC2JSON)
def test_tei_references_and_citation_links_match_doc2json(shared_data, name):
    paper = parse_tei(_tei(shared_data, name), name)
    expected = _doc2json(shared_data, name)
    bib = {entry["ref_id"]: entry for entry in expected["bib_entries"].values()}
    # doc2json drops entries GROBID could not title; we keep them (their raw text still resolves citations).
    titled = {ref.ref_id: ref for ref in paper.references if ref.title}
    assert set(titled) == set(bib)
    for ref_id, entry in bib.items():
        assert titled[ref_id].title == entry["title"]
        assert titled[ref_id].year == entry["year"]
    # Every in-text citation doc2json resolved, we resolve to the same bibliography id.
    expected_links = [
        (span["text"], f"b{span['ref_id'].removeprefix('BIBREF')}")
        for p in expected["body_text"]
        for span in p["cite_spans"]
        if span["ref_id"]
    ]
    ours = {(c.marker, c.ref_id) for c in paper.citations}
    assert expected_links and all(link in ours for link in expected_links)
    known = {ref.ref_id for ref in paper.references}
    assert all(c.ref_id in known for c in paper.citations if c.ref_id)


def test_tei_figures_tables_formulas_and_dois(shared_data):
    paper = parse_tei(_tei(shared_data, "2020.acl-main.207"), "specter")
    kinds = [e.kind for e in paper.elements]
    assert kinds.count("formula") >= 3 and "figure" in kinds and kinds.count("table") >= 3
    formula = next(e for e in paper.elements if e.kind == "formula" and e.label == "(1)")
    assert "Transformer(input)" in formula.content
    journal = parse_tei(_tei(shared_data, "0f318087-b211-4ace-8ac9-3d9372a73c1c"), "tei-only")
    table = next(e for e in journal.elements if e.kind == "table")
    assert "VAS | 3.75 ± 3.91" in table.content
    assert journal.elements[0].page is not None  # coordinates carried into pages


def test_malformed_tei_is_a_recorded_failure():
    with pytest.raises(ParseFailure) as failure:
        parse_tei(b"<html><body>502 Bad Gateway</body></html>", "x")
    assert failure.value.reason == "bad_tei"
    with pytest.raises(ParseFailure):
        parse_tei(b"<TEI><unclosed>", "x")


# ---------------------------------------------------------------- GROBID client end to end


class _FakeGrobid(BaseHTTPRequestHandler):
    tei: bytes = b""
    alive = True
    fulltext_status = 200
    received: list[bytes] = []

    def do_GET(self):  # noqa: N802
        if self.path == "/api/isalive":
            body = b"true" if self.alive else b"false"
            self._send(200 if self.alive else 503, body, "text/plain")
        else:
            self._send(404, b"", "text/plain")

    def do_POST(self):  # noqa: N802
        length = int(self.headers.get("Content-Length", 0))
        payload = self.rfile.read(length)
        type(self).received.append(payload)
        if self.path != "/api/processFulltextDocument":
            self._send(404, b"", "text/plain")
        elif b"%PDF-" not in payload or b'name="input"' not in payload:
            self._send(400, b"no PDF in the multipart input", "text/plain")
        else:
            body = self.tei if self.fulltext_status == 200 else b"[GENERAL] boom"
            self._send(self.fulltext_status, body, "application/xml")

    def _send(self, status: int, body: bytes, content_type: str):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def grobid_server(shared_data):
    handler = type("Handler", (_FakeGrobid,), {"tei": _tei(shared_data, "N18-3011"), "received": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield handler, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_grobid_client_end_to_end(grobid_server, shared_data):
    handler, url = grobid_server
    parser = get_parser("grobid", grobid_url=url)
    paper = parser.parse(shared_data / "pdfs" / "N18-3011.pdf", "n18")
    assert paper.parser == "grobid" and paper.page_count == 8
    assert [s.number for s in paper.sections][:3] == ["1", "2", "2.1"]
    assert len(paper.references) == 27
    assert handler.received and handler.received[0].count(b"%PDF-") >= 1  # the real PDF was posted


def test_grobid_url_from_environment(grobid_server, shared_data, monkeypatch):
    _, url = grobid_server
    monkeypatch.setenv("GROBID_URL", url)
    assert GrobidParser().grobid_url == url
    assert GrobidParser().parse(shared_data / "pdfs" / "N18-3011.pdf", "n18").sections


def test_grobid_server_errors_are_reasons(grobid_server, shared_data):
    handler, url = grobid_server
    handler.fulltext_status = 500
    with pytest.raises(ParseFailure) as failure:
        GrobidParser(grobid_url=url).parse(shared_data / "pdfs" / "N18-3011.pdf", "n18")
    assert failure.value.reason == "grobid_error"
    handler.alive = False
    with pytest.raises(ParserUnavailable):
        GrobidParser(grobid_url=url).parse(shared_data / "pdfs" / "N18-3011.pdf", "n18")


def test_no_grobid_server_is_parser_unavailable(shared_data):
    with pytest.raises(ParserUnavailable) as failure:
        GrobidParser(grobid_url="http://127.0.0.1:9").parse(shared_data / "pdfs" / "N18-3011.pdf", "n18")
    assert "not reachable" in failure.value.detail


# ---------------------------------------------------------------- combined strategy


def test_combined_grobid_structure_with_pymupdf_tables(grobid_server, shared_data):
    _, url = grobid_server
    options = {"grobid": {"grobid_url": url}, "pymupdf": {"tables": "fast"}}  # the finder is tested elsewhere
    paper = CombinedParser(parser_options=options).parse(shared_data / "pdfs" / "N18-3011.pdf", "n18")
    # unstructured cannot run here, so the table content comes from the PyMuPDF parser.
    assert paper.parser == "combined:grobid+pymupdf"
    assert len(paper.references) == 27  # GROBID's bibliography
    tables = [e for e in paper.elements if e.kind == "table"]
    assert tables and any("85.5" in t.content for t in tables)


def test_combined_falls_back_without_grobid(shared_data):
    options = {"grobid": {"grobid_url": "http://127.0.0.1:9"}, "pymupdf": {"tables": "fast"}}
    parser = CombinedParser(parser_options=options)
    paper = parser.parse(shared_data / "pdfs" / "N18-3011.pdf", "n18")
    assert paper.parser == "combined:pymupdf+pymupdf"


def test_merge_tables_prefers_richer_content():
    paper = ParsedPaper(
        "p",
        "grobid",
        elements=[Element("table", "Table 1", "Results", ""), Element("figure", "Figure 1", "Arch", "")],
    )
    changed = merge_tables(
        paper, [Element("table", "Table 1", "", "a | b\n1 | 2"), Element("table", "Table 2", "", "c | d")]
    )
    assert changed == 2
    assert paper.elements[0].content == "a | b\n1 | 2" and paper.elements[0].caption == "Results"
    assert paper.elements[-1].label == "Table 2"


def test_parsed_papers_asset_with_grobid_config(grobid_server, shared_data, data_dir):
    """ParsingConfig(parser="grobid") + GrobidResource(url=...) reach the asset; the parser is recorded."""
    import dagster as dg

    from lumina_assets.core import tables
    from lumina_assets.core.schemas import PAPERS_TABLE_SCHEMA, rows_to_table
    from lumina_assets.defs.parsing import ASSETS
    from resources.grobid import GrobidResource
    from resources.parsing import ParsingConfig

    _, url = grobid_server
    row = {"paper_id": "pdf:n18", "title": "n18", "source": "local_pdf", "ingest_batch": "b1"}
    row["local_path"] = str(shared_data / "pdfs" / "N18-3011.pdf")
    tables.write(tables.PAPERS, rows_to_table([row], PAPERS_TABLE_SCHEMA))
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("ingest_batches", ["b1"])
    resources = {"parsing": ParsingConfig(parser="grobid"), "grobid": GrobidResource(url=url)}
    assert dg.materialize(ASSETS[:2], instance=instance, partition_key="b1", resources=resources).success
    parsed = tables.read(tables.PARSED_PAPERS, "b1").row(0, named=True)
    assert (parsed["status"], parsed["parser"], parsed["references"]) == ("ok", "grobid@1.1", 27)
    paper = ParsedPaper.from_json(parsed["parsed_json"])
    assert paper.sections[0].title == "Introduction" and paper.page_count == 8
