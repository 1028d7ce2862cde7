"""The results page of `lumina serve` in headless Chromium (Debian chromium driven by npm playwright-core, found as
devtools/ui_check.py finds them; skipped where either is missing): search with a visible working state, result
count and time, one card per paper (authors · venue · year, in-corpus cited-by count, PDF at the passage's page),
the best passage first and the others behind "n more passages", neighbours not repeating what the card shows,
sort by date, page size and paging, the query in the URL (a shareable link, Back), copy BibTeX, export, no pager
without results; then a saved search: saved from the page, raised by new hits ("new" badge), opened (marked seen).
On a small index built with the deterministic hashing embedder."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from hashing_embedder import HashingEmbedder
from tools import missing_tool

from bench.serve_load import serve_in_thread
from lumina_assets.core import tables
from lumina_assets.core.schemas import PASSAGE_SCHEMA, rows_to_table
from lumina_assets.indexing import lancedb_tables as indexing
from lumina_assets.indexing.connection import connect_lancedb
from lumina_assets.parsing.chunking import passages_for_paper
from lumina_assets.search.api import create_app
from lumina_assets.search.config import SearchConfig
from lumina_assets.search.engine import SearchEngine
from lumina_assets.search.results import SearchService

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "devtools"))
import ui_check  # noqa: E402

pytestmark = pytest.mark.slow

QUERY = "citation graph training signal"
ABSTRACT = (
    "We train document embeddings with a triplet loss over the citation graph. Citations provide the training "
    "signal: a cited paper is a positive and an uncited one a negative. The model needs no citations at inference. "
    "Citation graph neighbours also help at training time. Fine-tuning uses the same citation signal."
)

SCRIPT = r"""
const { chromium } = require(process.env.PLAYWRIGHT_CORE);
const job = JSON.parse(process.argv[2]);
const out = { steps: [] };
const done = (page) => page.waitForFunction(() => document.body.dataset.state === "done", null, { timeout: 60000 });
const cards = (page) => page.locator("article.result").evaluateAll((ns) => ns.map((n) => ({
  title: n.querySelector("h2").innerText, meta: n.querySelector(".meta").innerText,
  links: n.querySelector(".links").innerText, pdf: n.querySelector("a.pdf")?.getAttribute("href") || null })));
const ranks = (page) => page.locator("article.result h2").evaluateAll((ns) => ns.map((n) => parseInt(n.innerText)));
const query = (page) => Object.fromEntries(new URL(page.url()).searchParams);

async function phaseOne(page, context) {
  // a slow first search (sentence backfill) shows the working state
  await page.route("**/api/search", async (route) => { await new Promise((r) => setTimeout(r, 1500)); await route.continue(); });
  await page.goto(job.url);
  await page.locator("#q").focus();
  await page.keyboard.type(job.query);
  await page.keyboard.press("Enter");
  await page.waitForSelector("#working", { timeout: 5000 });
  out.working = await page.locator("#working").innerText();
  out.working_state = await page.evaluate(() => document.body.dataset.state);
  await done(page);
  await page.unroute("**/api/search");
  out.status = await page.locator("#status").innerText();
  out.first = await cards(page);
  out.first_url = query(page);
  out.exports_hidden = await page.locator("#exports").isHidden();
  // collapsed passages: the first card with more than one passage
  const toggle = page.locator("button.toggle-passages").first();
  const card = page.locator("article.result").filter({ has: toggle }).first();
  out.collapsed = { label: await toggle.innerText(), visible_before: await card.locator(".passage:visible").count() };
  await toggle.focus();
  await page.keyboard.press("Enter");  // keyboard-usable: a real button
  out.collapsed.expanded = await toggle.getAttribute("aria-expanded");
  out.collapsed.visible_after = await card.locator(".passage:visible").count();
  out.collapsed.label_after = await toggle.innerText();
  // surrounding passages never repeat a passage the card already shows
  await card.locator("button.expand").first().click();
  await page.waitForFunction((n) => [...document.querySelectorAll("button.expand")][0].disabled, null, { timeout: 10000 });
  await page.waitForTimeout(300);
  out.shown_ids = await card.locator(".passage:visible").evaluateAll((ns) => ns.map((n) => n.dataset.passageId));
  await toggle.click();
  out.collapsed.after_collapse = await toggle.getAttribute("aria-expanded");
  // labels sit next to their checkboxes
  out.check_boxes = await page.locator("label.check").evaluateAll((ns) => ns.map((l) => {
    const box = l.querySelector("input").getBoundingClientRect(), r = l.getBoundingClientRect();
    return { width: r.width, gap: r.right - box.right, text: l.innerText };
  }));
  // copy BibTeX of the first paper
  await page.locator("button.copy-bibtex").first().click();
  await page.waitForFunction(() => /copied|selected/.test(document.querySelector("button.copy-bibtex").innerText), null, { timeout: 10000 });
  out.copy_label = await page.locator("button.copy-bibtex").first().innerText();
  out.clipboard = await page.evaluate(() => navigator.clipboard.readText()).catch((e) => "ERR " + e);
  // export the list: a real download
  const [download] = await Promise.all([page.waitForEvent("download"), page.click("#export_ris")]);
  out.export_name = download.suggestedFilename();
  await download.saveAs(job.ris);
  const [csvDownload] = await Promise.all([page.waitForEvent("download"), page.click("#export_csv")]);
  await csvDownload.saveAs(job.csv);
  // sort by date
  await page.selectOption("#sort", "date");
  await done(page); await page.waitForFunction(() => new URL(location).searchParams.get("sort") === "date");
  await page.waitForFunction(() => document.querySelector("#status").innerText.includes("newest"));
  out.by_date = await cards(page);
  out.date_url = query(page);
  // page size 5, then page 2
  await page.selectOption("#k", "5");
  await page.waitForFunction(() => document.querySelectorAll("article.result").length === 5 && document.body.dataset.state === "done");
  out.k5 = { ranks: await ranks(page), url: query(page), pager: await page.locator("#pager").isVisible() };
  await page.click("#next");
  await page.waitForFunction(() => new URL(location).searchParams.get("page") === "2" && document.body.dataset.state === "done");
  await page.waitForFunction(() => parseInt(document.querySelector("article.result h2").innerText) === 6);
  out.page2 = { ranks: await ranks(page), url: query(page), info: await page.locator("#pageinfo").innerText() };
  // Back: page 1 of 5, then 10 by date, then the first search
  await page.goBack();
  await page.waitForFunction(() => parseInt(document.querySelector("article.result h2").innerText) === 1 && document.body.dataset.state === "done");
  out.back1 = { ranks: await ranks(page), url: query(page), k: await page.inputValue("#k") };
  await page.goBack();
  await page.waitForFunction(() => document.querySelectorAll("article.result").length > 5 && document.body.dataset.state === "done");
  out.back2 = { url: query(page), sort: await page.inputValue("#sort"), count: await page.locator("article.result").count() };
  // a shared link opens the same search (filters, sort, size, page)
  const shared = await context.newPage();
  await shared.goto(job.url + "?q=" + encodeURIComponent(job.query) + "&venue=ACL&sort=date&k=5&page=2");
  await done(shared);
  out.shared = { q: await shared.inputValue("#q"), venue: await shared.inputValue("#venue"), sort: await shared.inputValue("#sort"),
                 k: await shared.inputValue("#k"), ranks: await ranks(shared), cards: await cards(shared) };
  await shared.close();
  // no results: no pager, no export
  await page.fill("#author", "Nobody Atall");
  await page.dispatchEvent("#author", "change");
  await page.waitForFunction(() => document.body.dataset.state === "done" && document.querySelectorAll("article.result").length === 0);
  out.empty = { pager: await page.locator("#pager").isVisible(), exports: await page.locator("#exports").isVisible(),
                message: await page.locator("#message").innerText() };
  // save a search
  await page.fill("#author", "");
  await page.dispatchEvent("#author", "change");
  await done(page); await page.waitForSelector("article.result");
  await page.fill("#save_name", "citation-signal");
  await page.click("#save");
  await page.waitForSelector('#saved li[data-name="citation-signal"]', { timeout: 10000 });
  out.saved = { status: await page.locator("#save_status").innerText(), count: await page.locator("#status").innerText(), list: await page.locator("#saved").innerText() };
  await page.screenshot({ path: job.screenshot, fullPage: false });
}

async function phaseTwo(page) {
  const seen = [];
  page.on("request", (r) => { if (r.method() === "POST" && r.url().includes("/seen")) seen.push(new URL(r.url()).pathname); });
  await page.goto(job.url);
  await page.waitForSelector('#saved li[data-name="citation-signal"] .badge', { timeout: 10000 });
  out.badge = await page.locator('#saved li[data-name="citation-signal"] .badge').innerText();
  out.feed = await page.locator('#saved li[data-name="citation-signal"] a.feed').getAttribute("href");
  await page.click('#saved li[data-name="citation-signal"] button.saved-search');
  await done(page);
  await page.waitForFunction(() => !document.querySelector('#saved li[data-name="citation-signal"] .badge'), null, { timeout: 10000 });
  out.opened = { q: await page.inputValue("#q"), results: await page.locator("article.result").count(), url: query(page) };
  out.seen = seen;
}

(async () => {
  const browser = await chromium.launch({ executablePath: job.chromium, args: job.flags, headless: true });
  try {
    const context = await browser.newContext({ viewport: { width: 1200, height: 1300 }, acceptDownloads: true });
    await context.grantPermissions(["clipboard-read", "clipboard-write"], { origin: job.url.replace(/\/$/, "") });
    const page = await context.newPage();
    page.on("pageerror", (e) => out.steps.push("pageerror " + String(e).slice(0, 200)));
    if (job.phase === 1) await phaseOne(page, context); else await phaseTwo(page);
  } catch (e) { out.error = String(e).slice(0, 1500); }
  await browser.close();
  console.log(JSON.stringify(out));
})();
"""


@pytest.fixture()
def service(tmp_path, data_dir, shared_data):
    """18 papers on one topic (years 2005-2022, ACL or Nature Medicine), each split into short passages, all on
    pages 3-4; citation edges so some papers are cited; one stored PDF behind every paper."""
    from lumina_assets.parsing.pdf_store import PdfStore

    embedder = HashingEmbedder()
    papers, passages = [], []
    for i in range(18):
        paper_id = f"doi:10.7/r{i}"
        title = f"Citation-informed training number {i}"
        papers.append(
            {
                "paper_id": paper_id,
                "title": title,
                "abstract": ABSTRACT,
                "doi": f"10.7/r{i}",
                "year": 2005 + (i * 7) % 18,
                "authors": ["Arman Cohan", "Zoë Müller"] if i % 2 else ["Iz Beltagy"],
                "venue": "ACL" if i % 3 else "Nature Medicine",
                "source": "test",
            }
        )
        passages += [
            p.to_row() for p in passages_for_paper(paper_id, title=title, abstract=ABSTRACT, max_tokens=20)
        ]
    frame = pl.from_arrow(rows_to_table(passages, PASSAGE_SCHEMA)).with_columns(
        pl.lit(3, dtype=pl.Int32).alias("page_start"), pl.lit(4, dtype=pl.Int32).alias("page_end")
    )
    uri = str(tmp_path / "lancedb")
    indexing.index_corpus(connect_lancedb(uri), frame, pl.DataFrame(papers), embedder)
    tables.write(tables.PASSAGES, frame, partition="batch1")
    tables.write(
        tables.CITATION_EDGES,
        pl.DataFrame({"citing": [f"doi:10.7/r{i}" for i in range(1, 6)], "cited": ["doi:10.7/r0"] * 5}),
    )
    stored = PdfStore().put_file(shared_data / "pdfs" / "pasa.pdf")
    tables.write(
        tables.PDF_FILES,
        pl.DataFrame({"paper_id": [p["paper_id"] for p in papers], "sha256": stored.sha256, "status": "ok"}),
        partition="batch1",
    )
    return SearchService(lambda: SearchEngine(uri, embedder, SearchConfig()), pool_size=2)


def _browse(port: int, tmp_path: Path, phase: int) -> dict:
    job = {
        "url": f"http://127.0.0.1:{port}/",
        "query": QUERY,
        "phase": phase,
        "chromium": ui_check.find_chromium(),
        "flags": ui_check.CHROMIUM_FLAGS,
        "ris": str(tmp_path / "export.ris"),
        "csv": str(tmp_path / "export.csv"),
        "screenshot": str(tmp_path / "results_page.png"),
    }
    script = tmp_path / "page.js"
    script.write_text(SCRIPT)
    done = subprocess.run(
        ["node", str(script), json.dumps(job)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PLAYWRIGHT_CORE": str(ui_check.find_playwright_core())},
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    assert lines, done.stderr[-3000:]
    out = json.loads(lines[-1])
    assert "error" not in out and not out["steps"], out
    return out


def _raise_new_hits(service: SearchService) -> int:
    """What the alerts sensor does after a new batch: the saved search evaluated against the index, with its
    top papers first seen after it was saved (so they are new hits)."""
    from lumina_assets.search import alerts, saved_searches

    search = saved_searches.get("citation-signal")
    with service.pool.engine() as engine:
        contexts = engine.search(search.request().engine_query(), k=search.k)
    later = "2999-01-01T00:00:00+00:00"
    catalogue = {c.paper_id: {"first_seen": later, "ingest_batch": "batch2"} for c in contexts[:3]}
    with saved_searches.updating_hits() as state:
        state["searches"].pop(search.id, None)
        hits = alerts.evaluate(
            search, contexts, state, catalogue, found_at=saved_searches.now(), index_run="test"
        )
    return len(hits)


def test_results_page_in_headless_chromium(service, tmp_path):
    import rispy

    missing = ui_check.missing_browser_tools()
    if missing:
        missing_tool("the results page check needs " + ", ".join(missing))
    server, thread, port = serve_in_thread(create_app(service))
    try:
        out = _browse(port, tmp_path, 1)
        new_hits = _raise_new_hits(service)
        later = _browse(port, tmp_path, 2)
    finally:
        server.should_exit = True
        thread.join(timeout=10)

    # the working state, then the count and time
    assert out["working"].startswith("Searching") and out["working_state"] == "working"
    assert out["status"].startswith("Papers 1–10 (more on the next page)") and " s" in out["status"]
    assert out["first_url"] == {"q": QUERY} and not out["exports_hidden"]
    # cards: authors · venue · year, cited-by count, DOI and the PDF at the passage's page
    assert len(out["first"]) == 10
    first = out["first"][0]
    assert " · " in first["meta"] and ("ACL" in first["meta"] or "Nature Medicine" in first["meta"])
    assert "DOI" in first["links"] and "cited by" in first["links"] and "PDF (p. 3)" in first["links"]
    assert first["pdf"].endswith("#page=3") and "/Citation-informed-training-number-" in first["pdf"]
    assert any("cited by 5 in the corpus" in c["links"] for c in out["first"])  # r0, cited by r1..r5
    # one passage shown, the others behind "n more passages" (keyboard: Enter on the button)
    collapsed = out["collapsed"]
    assert collapsed["label"].endswith("more passages") and collapsed["visible_before"] == 1
    more = int(collapsed["label"].split()[0])
    assert collapsed["expanded"] == "true" and collapsed["visible_after"] == 1 + more
    assert collapsed["label_after"].startswith("hide ") and collapsed["after_collapse"] == "false"
    assert len(out["shown_ids"]) == len(set(out["shown_ids"])), "a neighbour repeated a passage on the card"
    # checkboxes next to their labels
    assert all(c["width"] < 250 and c["gap"] < 200 for c in out["check_boxes"]), out["check_boxes"]
    # copy BibTeX: the first paper's entry on the clipboard
    assert out["copy_label"] == "BibTeX copied"
    assert out["clipboard"].startswith("@") and first["title"].split(". ", 1)[1] in out["clipboard"]
    # export: a named RIS file and a CSV of the ten papers shown
    assert out["export_name"] == "lumina-citation-graph-training-signal.ris"
    records = rispy.loads((tmp_path / "export.ris").read_text(encoding="utf-8"))
    assert [r["title"] for r in records] == [c["title"].split(". ", 1)[1] for c in out["first"]]
    rows = list(csv.DictReader(io.StringIO((tmp_path / "export.csv").read_text(encoding="utf-8"))))
    assert len(rows) == 10 and rows[0]["evidence_page"] == "3"
    # sort by date: newest first, in the URL
    years = [int(c["meta"].rsplit(" · ", 1)[1]) for c in out["by_date"]]
    assert years == sorted(years, reverse=True) and out["date_url"]["sort"] == "date"
    # page size and paging
    assert out["k5"]["ranks"] == [1, 2, 3, 4, 5] and out["k5"]["url"]["k"] == "5" and out["k5"]["pager"]
    assert out["page2"]["ranks"] == [6, 7, 8, 9, 10] and out["page2"]["url"]["page"] == "2"
    # Back replays the earlier searches
    assert (
        out["back1"]["ranks"] == [1, 2, 3, 4, 5]
        and "page" not in out["back1"]["url"]
        and out["back1"]["k"] == "5"
    )
    assert out["back2"]["sort"] == "date" and out["back2"]["count"] == 10 and "k" not in out["back2"]["url"]
    # a shared link: the form filled from it, the same search shown
    shared = out["shared"]
    assert (shared["q"], shared["venue"], shared["sort"], shared["k"]) == (QUERY, "ACL", "date", "5")
    assert shared["ranks"][0] == 6 and all("ACL" in c["meta"] for c in shared["cards"])
    # no results: no pager, no export links
    assert (
        not out["empty"]["pager"] and not out["empty"]["exports"] and "No results" in out["empty"]["message"]
    )
    # saved, then raised by new hits, then opened and marked seen
    assert "Saved as" in out["saved"]["status"] and "citation-signal" in out["saved"]["list"]
    assert out["saved"]["count"].startswith("Papers 1–10")  # the result count stays
    assert new_hits == 3 and later["badge"] == "3 new" and later["feed"] == "/feeds/citation-signal.xml"
    assert later["opened"]["q"] == QUERY and later["opened"]["results"] == 10
    assert later["seen"] == ["/api/alerts/citation-signal/seen"]
    assert (tmp_path / "results_page.png").stat().st_size > 20_000
