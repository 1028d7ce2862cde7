"""A screenshot of `lumina serve`'s results page: serve an index on 127.0.0.1 in this process, search in headless
Chromium (Debian `chromium` driven by npm `playwright-core`, found as devtools/ui_check.py finds them), open the
first result's other passages and save a PNG of the page.

    LUMINA_DATA_DIR=/tmp/demo LUMINA_CORPUS=../shared/data/pdfs .venv/bin/lumina demo --groups corpus,parsing,index
    LUMINA_DATA_DIR=/tmp/demo .venv/bin/python devtools/search_screenshot.py --db /tmp/demo/lancedb \
        --query "how does SPECTER use citations for training" [--out docs/img/results-page.png]

The repository ships no third-party papers: build the index from ../shared/data (the PDFs as above, or
`lumina eval beir ../shared/data/scifact --split train`) and point --db at it. Exit status 2 when the browser
tools are missing.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "devtools")]

SCRIPT = r"""
const { chromium } = require(process.env.PLAYWRIGHT_CORE);
const job = JSON.parse(process.argv[2]);
(async () => {
  const out = {};
  const browser = await chromium.launch({ executablePath: job.chromium, args: job.flags, headless: true });
  try {
    const page = await browser.newPage({ viewport: { width: job.width, height: job.height } });
    await page.goto(job.url);
    await page.fill("#q", job.query);
    await page.click("#go");
    await page.waitForSelector(".result mark", { timeout: 120000 });
    await page.click("#go");  // again, warm: the time shown is a search's, not the first one's model loading
    await page.waitForFunction(() => document.body.dataset.state === "done", null, { timeout: 120000 });
    const more = page.locator("button.toggle-passages").first();
    if (await more.count()) await more.click();
    out.results = await page.locator(".result").count();
    out.marks = await page.locator(".result mark").count();
    await page.screenshot({ path: job.out, fullPage: false });
  } catch (e) { out.error = String(e); }
  await browser.close();
  console.log(JSON.stringify(out));
})();
"""


def main(argv: list[str] | None = None) -> int:
    import ui_check

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", required=True, help="LanceDB URI of the index to serve")
    parser.add_argument("--query", default="how does SPECTER use citations for training")
    parser.add_argument("--out", default=str(ROOT / "docs" / "img" / "results-page.png"))
    parser.add_argument("--width", type=int, default=1200)
    parser.add_argument("--height", type=int, default=1300)
    args = parser.parse_args(argv)

    missing = ui_check.missing_browser_tools()
    if missing:
        print("cannot take the screenshot: " + ", ".join(missing), file=sys.stderr)
        return 2
    from bench.serve_load import serve_in_thread
    from lumina_assets.cli.serve import build_service
    from lumina_assets.search.api import create_app

    service = build_service(args.db, engines=1, use_llm=False)
    service.warm_up()
    server, thread, port = serve_in_thread(create_app(service))
    try:
        job = {
            "url": f"http://127.0.0.1:{port}/",
            "query": args.query,
            "chromium": ui_check.find_chromium(),
            "flags": ui_check.CHROMIUM_FLAGS,
            "out": str(Path(args.out).resolve()),
            "width": args.width,
            "height": args.height,
        }
        Path(job["out"]).parent.mkdir(parents=True, exist_ok=True)
        script = Path(job["out"]).with_suffix(".js")
        script.write_text(SCRIPT)
        try:
            done = subprocess.run(
                ["node", str(script), json.dumps(job)],
                capture_output=True,
                text=True,
                timeout=300,
                env={**os.environ, "PLAYWRIGHT_CORE": str(ui_check.find_playwright_core())},
            )
        finally:
            script.unlink(missing_ok=True)
    finally:
        server.should_exit = True
        thread.join(timeout=10)
    lines = done.stdout.strip().splitlines()
    out = json.loads(lines[-1]) if lines else {"error": done.stderr[-2000:]}
    print(json.dumps(out))
    return 0 if "error" not in out and out.get("marks", 0) > 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
