"""Check the Dagster UI for real: start `dagster dev` on 127.0.0.1, open the asset graph in headless Chromium
(Debian's `chromium` driven by npm `playwright-core`), check that every asset group and asset of the Definitions is
drawn and that the report asset shows its plots, save a screenshot under data/reports/, stop the server by PID.

    .venv/bin/python devtools/ui_check.py [--port 3333] [--screenshot data/reports/ui_asset_graph.png]

Exit status 0 when every check passed, 1 when one failed, 2 when the browser or playwright-core is missing.
playwright-core is looked up in $LUMINA_PLAYWRIGHT_DIR, .venv/ui-check, ./node_modules and node's global path
(install: `npm install --prefix .venv/ui-check playwright-core`).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
REPORT_ASSET = "benchmark_report"

# Runs in node: everything the browser does. Reads its job from argv[2] (JSON), prints one JSON line.
BROWSER_SCRIPT = r"""
const { chromium } = require(process.env.PLAYWRIGHT_CORE);
const job = JSON.parse(process.argv[2]);

async function dismissDialogs(page) {
  // First load shows "Join the Dagster community" (and sometimes other one-time dialogs).
  for (let round = 0; round < 3; round++) {
    const dialog = page.locator('[role="dialog"]');
    if ((await dialog.count()) === 0) return;
    const text = (await dialog.first().innerText().catch(() => "")) || "";
    if (text.includes("Join the Dagster community")) return; // the locator handler below dismisses it
    let clicked = false;
    for (const name of ["Skip", "No thanks", "Dismiss", "Close", "Not now", "Done", "Cancel"]) {
      const button = dialog.first().getByRole("button", { name, exact: false });
      if ((await button.count()) > 0) { await button.first().click(); clicked = true; break; }
    }
    if (!clicked) await page.keyboard.press("Escape");
    job.dismissed.push(text.split("\n")[0].slice(0, 80));
    await page.waitForTimeout(500);
  }
}

(async () => {
  const result = { dismissed: [], missing_assets: [], missing_groups: [], report: null, errors: [] };
  job.dismissed = result.dismissed;
  const browser = await chromium.launch({ executablePath: job.chromium, args: job.flags, headless: true });
  try {
    const page = await browser.newPage({ viewport: { width: 2200, height: 1400 } });
    page.on("pageerror", (e) => result.errors.push(String(e).slice(0, 200)));
    // The community dialog can also open after the graph has loaded: dismiss it whenever it blocks an action.
    await page.addLocatorHandler(page.getByText("Join the Dagster community"), async () => {
      await page.getByRole("button", { name: "Skip" }).first().click();
      job.dismissed.push("Join the Dagster community (late)");
    });
    await page.goto(job.base + "/asset-groups", { waitUntil: "domcontentloaded" });
    await page.waitForTimeout(1500);
    await dismissDialogs(page);
    // Groups start collapsed. "Expand all groups" is in the graph's context menu (shortcut Alt+E); right-click
    // blank canvas (a corner of the graph viewport) and fall back to the shortcut.
    await page.locator("foreignObject").first().waitFor({ timeout: job.timeout_ms });
    const canvas = page.locator("svg").filter({ has: page.locator("foreignObject") }).first();
    const viewport = await canvas.locator("xpath=..").boundingBox();
    const item = page.getByRole("menuitem", { name: /Expand all groups/ });
    // A late community dialog closes the menu while its handler runs: a short click timeout, then open it again.
    let expanded = false;
    for (let attempt = 0; attempt < 3 && !expanded; attempt++) {
      for (const [dx, dy] of [[15, 15], [viewport.width - 80, 15], [15, viewport.height - 15]]) {
        await page.mouse.click(viewport.x + dx, viewport.y + dy, { button: "right" });
        if (await item.isVisible({ timeout: 1500 }).catch(() => false)) {
          expanded = await item.click({ timeout: 3000 }).then(() => true).catch(() => false);
          if (expanded) break;
        }
        await page.keyboard.press("Escape");
      }
    }
    if ((await page.locator('foreignObject [class*="assetName"]').count()) === 0) {
      await page.mouse.click(viewport.x + 15, viewport.y + 15);
      await page.keyboard.press("Alt+e");
    }
    result.expanded_groups = true;
    await page.waitForTimeout(1500);
    // The graph is drawn when every expected asset has a node and every group a box. Long names are
    // shortened in the middle ("synthet…_questions"), so a label matches its asset by prefix and suffix.
    const matches = (label, name) => {
      if (label === name) return true;
      const [head, tail] = label.split("…");
      return tail !== undefined && name.startsWith(head) && name.endsWith(tail);
    };
    const deadline = Date.now() + job.timeout_ms;
    while (Date.now() < deadline) {
      await dismissDialogs(page);
      const labels = await page.$$eval('foreignObject [class*="assetName"]', (ns) => ns.map((n) => n.textContent.trim()));
      const leaves = await page.$$eval("foreignObject *", (ns) =>
        ns.filter((n) => n.children.length === 0).map((n) => (n.textContent || "").trim()));
      result.node_labels = labels;
      result.missing_assets = job.assets.filter((a) => !labels.some((l) => matches(l, a)));
      result.missing_groups = job.groups.filter((g) => !leaves.includes(g));
      if (!result.missing_assets.length && !result.missing_groups.length) break;
      await page.waitForTimeout(1000);
    }
    result.asset_nodes = (result.node_labels || []).length;
    await page.waitForTimeout(800);
    await page.screenshot({ path: job.screenshot, fullPage: false });
    if (job.report_asset) {
      await page.goto(job.base + "/assets/" + job.report_asset, { waitUntil: "domcontentloaded" });
      await page.waitForTimeout(2000);
      await dismissDialogs(page);
      // Plots are markdown metadata entries (plot_*): open each and check the image really loaded.
      const loadedImages = async (scope) => scope.locator("img").evaluateAll((nodes) =>
        nodes.filter((n) => n.complete && n.naturalWidth > 100 && n.naturalHeight > 100)
             .map((n) => ({ src: n.src.slice(0, 30), w: n.naturalWidth, h: n.naturalHeight })));
      let images = await loadedImages(page);
      const rows = page.locator("tr").filter({ hasText: /plot_/ });
      const plotRows = await rows.count();
      for (let i = 0; i < plotRows; i++) {
        const row = rows.nth(i);
        const key = ((await row.locator("td").first().innerText()) || "").trim();
        await row.getByText(/Show Markdown/).first().click();
        const dialog = page.locator('[role="dialog"]').last();
        await dialog.waitFor({ timeout: 10000 });
        let found = [];
        const until = Date.now() + 10000;
        while (Date.now() < until && !found.length) {
          found = await loadedImages(dialog);
          if (!found.length) await page.waitForTimeout(300);
        }
        images = images.concat(found.map((f) => ({ ...f, key })));
        if (i === 0) await page.screenshot({ path: job.report_screenshot });
        await page.keyboard.press("Escape");
        await page.waitForTimeout(300);
      }
      const text = await page.locator("body").innerText();
      result.report = { images, plot_entries: plotRows, materialized: !/Never materialized/i.test(text) };
      if (!plotRows) await page.screenshot({ path: job.report_screenshot, fullPage: true });
    }
  } catch (e) {
    result.errors.push(String(e).slice(0, 500));
    try { await browser.contexts()[0].pages()[0].screenshot({ path: job.screenshot }); } catch (_) {}
  } finally {
    await browser.close();
  }
  console.log(JSON.stringify(result));
})();
"""


def missing_browser_tools() -> list[str]:
    """What a headless-Chromium check still needs on this machine (empty when it can run), with how to get it."""
    needs = (
        ("Debian chromium (apt-get install chromium)", find_chromium),
        ("node", lambda: shutil.which("node")),
        ("npm playwright-core (npm install --prefix .venv/ui-check playwright-core)", find_playwright_core),
    )
    return [name for name, find in needs if not find()]


def find_playwright_core() -> Path | None:
    candidates = [os.environ.get("LUMINA_PLAYWRIGHT_DIR", "")]
    candidates += [str(PROJECT_ROOT / ".venv" / "ui-check"), str(PROJECT_ROOT)]
    for base in filter(None, candidates):
        for path in (Path(base) / "node_modules" / "playwright-core", Path(base) / "playwright-core"):
            if (path / "package.json").is_file():
                return path
    if shutil.which("npm"):
        root = subprocess.run(["npm", "root", "-g"], capture_output=True, text=True).stdout.strip()
        if root and (Path(root) / "playwright-core" / "package.json").is_file():
            return Path(root) / "playwright-core"
    return None


def find_chromium() -> str | None:
    for name in ("/usr/bin/chromium", shutil.which("chromium"), shutil.which("chromium-browser")):
        if name and Path(name).is_file():
            return name
    return None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def expected_graph() -> tuple[list[str], list[str]]:
    """Asset names and group names of the shipped Definitions: the ground truth the UI must draw."""
    from lumina_assets.definitions import defs

    graph = defs.resolve_asset_graph()
    assets, groups = [], set()
    for key in graph.materializable_asset_keys:
        node = graph.get(key)
        assets.append(key.to_user_string())
        groups.add(node.group_name)
    return sorted(assets), sorted(groups)


def _graphql(base: str, query: str) -> dict:
    request = urllib.request.Request(
        f"{base}/graphql",
        data=json.dumps({"query": query}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


def wait_until_loaded(base: str, process: subprocess.Popen, timeout: float) -> None:
    """The webserver answers and the code location has loaded (or failed, which is an error)."""
    query = "{ workspaceOrError { ... on Workspace { locationEntries { name loadStatus locationOrLoadError { __typename ... on PythonError { message } } } } } }"
    deadline = time.monotonic() + timeout
    last = "no answer"
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"dagster dev exited with {process.returncode}")
        try:
            entries = _graphql(base, query)["data"]["workspaceOrError"]["locationEntries"]
            if entries and all(e["loadStatus"] == "LOADED" for e in entries):
                errors = [e for e in entries if e["locationOrLoadError"]["__typename"] == "PythonError"]
                if errors:
                    raise RuntimeError(
                        f"code location failed to load: {errors[0]['locationOrLoadError']['message']}"
                    )
                return
            last = json.dumps(entries)[:200]
        except (urllib.error.URLError, ConnectionError, TimeoutError, KeyError, TypeError) as exc:
            last = str(exc)
        time.sleep(1)
    raise RuntimeError(f"dagster dev not ready after {timeout:.0f}s ({last})")


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False


def stop_server(process: subprocess.Popen, grace: float = 30.0) -> None:
    """SIGINT to `dagster dev` (its clean shutdown), then SIGTERM / SIGKILL to whatever is left of its own process
    group (the code server only notices a dead parent after its heartbeat timeout)."""
    pgid = process.pid  # start_new_session=True: the server leads its own group
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            pass
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if not _group_alive(pgid):
            break
        os.killpg(pgid, sig)
        deadline = time.monotonic() + 10
        while _group_alive(pgid) and time.monotonic() < deadline:
            time.sleep(0.2)
    if process.poll() is None:
        process.wait(timeout=10)


RUNS_QUERY = (
    "{ runsOrError { ... on Runs { results { runId status creationTime assetSelection { path } "
    "tags { key value } } } } }"
)


def watch_inbox_ingestion(base: str, pdf: Path, timeout: float) -> bool:
    """Drop a PDF into the inbox of the running server and follow the runs the inbox sensor and the automation
    sensor launch, until `passage_index` is materialized (True) or the time is up (False). Only runs created after
    the drop count: an earlier `passage_index` run (the demo's) says nothing about this PDF."""
    from lumina_assets.core import settings

    dropped_at = time.time()
    inbox = settings.inbox_dir()
    inbox.mkdir(parents=True, exist_ok=True)
    target = inbox / pdf.name
    shutil.copyfile(pdf, target)
    settled = time.time() - 60  # older than the sensor's settle window
    os.utime(target, (settled, settled))
    print(f"dropped {pdf.name} into {inbox}; following the runs")
    started, shown = time.monotonic(), {}
    while time.monotonic() - started < timeout:
        for run in _graphql(base, RUNS_QUERY)["data"]["runsOrError"]["results"]:
            if (run.get("creationTime") or 0) < dropped_at:
                continue
            tags = {t["key"]: t["value"] for t in run["tags"]}
            assets = [".".join(a["path"]) for a in run["assetSelection"] or []]
            by = tags.get("dagster/sensor_name", tags.get("dagster/schedule_name", "manual"))
            partition = tags.get("dagster/partition") or tags.get("lumina/ingest_batch") or ""
            line = f"{run['status']:8} {','.join(sorted(assets))} [{partition}] by {by}"
            if shown.get(run["runId"]) != line:
                shown[run["runId"]] = line
                print(f"  {time.monotonic() - started:5.0f}s run {run['runId'][:8]} {line}")
            if "passage_index" in assets and run["status"] == "SUCCESS":
                return True
            if run["status"] == "FAILURE":
                print(f"  run {run['runId'][:8]} failed")
                return False
        time.sleep(5)
    return False


def run_check(
    port: int,
    screenshot: Path,
    dagster_home: Path | None,
    timeout: float,
    require_report: bool,
    ingest_pdf: Path | None = None,
) -> int:
    chromium = find_chromium()
    playwright = find_playwright_core()
    if not chromium or not playwright or not shutil.which("node"):
        print(
            "ui_check: needs Debian's chromium (apt-get install chromium), node and npm playwright-core "
            f"(npm install --prefix .venv/ui-check playwright-core); found chromium={chromium}, "
            f"playwright-core={playwright}, node={shutil.which('node')}"
        )
        return 2
    assets, groups = expected_graph()
    screenshot.parent.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    home = dagster_home or Path(env.get("DAGSTER_HOME") or PROJECT_ROOT / ".dagster_home")
    home.mkdir(parents=True, exist_ok=True)
    env["DAGSTER_HOME"] = str(home.resolve())
    dagster = Path(sys.executable).parent / "dagster"
    base = f"http://127.0.0.1:{port}"
    log_path = Path(tempfile.mkstemp(prefix="lumina-ui-", suffix=".log")[1])
    with log_path.open("wb") as log:
        server = subprocess.Popen(
            [
                str(dagster),
                "dev",
                "-h",
                "127.0.0.1",
                "-p",
                str(port),
                "-w",
                str(PROJECT_ROOT / "workspace.yaml"),
            ],
            cwd=PROJECT_ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        print(f"dagster dev pid {server.pid} on {base} (DAGSTER_HOME={home}, log {log_path})")
        wait_until_loaded(base, server, timeout)
        job = {
            "base": base,
            "chromium": chromium,
            "flags": CHROMIUM_FLAGS,
            "assets": assets,
            "groups": groups,
            "screenshot": str(screenshot),
            "report_asset": REPORT_ASSET if REPORT_ASSET in assets else None,
            "report_screenshot": str(screenshot.with_name(screenshot.stem + "_report.png")),
            "timeout_ms": int(timeout * 1000),
        }
        with tempfile.NamedTemporaryFile("w", suffix=".js", delete=False) as handle:
            handle.write(BROWSER_SCRIPT)
        browser = subprocess.run(
            ["node", handle.name, json.dumps(job)],
            capture_output=True,
            text=True,
            timeout=timeout * 3,
            env={**env, "PLAYWRIGHT_CORE": str(playwright)},
        )
        os.unlink(handle.name)
        lines = [line for line in browser.stdout.splitlines() if line.startswith("{")]
        if not lines:
            print(f"browser script failed: {browser.stderr[-2000:]}")
            return 1
        result = json.loads(lines[-1])
        ingested = watch_inbox_ingestion(base, ingest_pdf, timeout * 5) if ingest_pdf else None
    finally:
        stop_server(server)
    print(f"expected {len(assets)} assets in {len(groups)} groups: {', '.join(groups)}")
    print(f"asset nodes drawn: {result.get('asset_nodes', 0)}")
    print(f"dismissed dialogs: {result['dismissed'] or 'none'}")
    print(f"screenshot: {screenshot}")
    ok = not result["missing_assets"] and not result["missing_groups"] and not result["errors"]
    if result["missing_assets"]:
        print(f"FAIL assets not drawn: {result['missing_assets']}")
    if result["missing_groups"]:
        print(f"FAIL groups not drawn: {result['missing_groups']}")
    if result["errors"]:
        print(f"FAIL page errors: {result['errors']}")
    report = result.get("report")
    if report is None:
        print(
            f"report asset {REPORT_ASSET!r} not checked (not in the Definitions, or the graph check failed)"
        )
        ok = ok and not require_report
    else:
        print(
            f"report asset: materialized={report['materialized']}, plot entries={report.get('plot_entries', 0)}, "
            f"plots shown={len(report['images'])} {[(i.get('key'), i['w'], i['h']) for i in report['images']]}"
        )
        if require_report and not report["images"]:
            print("FAIL the report asset shows no plots")
            ok = False
    if server.returncode not in (0, -signal.SIGTERM, None) and server.returncode is not None:
        print(f"(dagster dev exited with {server.returncode})")
    if ingested is not None:
        print(f"inbox -> index without a manual step: {'yes' if ingested else 'NO'}")
        ok = ok and ingested
    print("UI CHECK PASSED" if ok else "UI CHECK FAILED")
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=0, help="default: a free port")
    parser.add_argument("--screenshot", default="", help="default: <data>/reports/ui_asset_graph.png")
    parser.add_argument("--dagster-home", default="", help="default: $DAGSTER_HOME or .dagster_home")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for the server / graph")
    parser.add_argument(
        "--require-report-plots", action="store_true", help="fail unless the report asset shows its plots"
    )
    parser.add_argument(
        "--ingest-pdf",
        default="",
        help="after the graph check, drop this PDF into the inbox and wait until the sensors index it",
    )
    args = parser.parse_args(argv)
    sys.path.insert(0, str(PROJECT_ROOT))
    from lumina_assets.core import settings

    screenshot = Path(args.screenshot) if args.screenshot else settings.reports_dir() / "ui_asset_graph.png"
    return run_check(
        args.port or free_port(),
        screenshot.resolve(),
        Path(args.dagster_home) if args.dagster_home else None,
        args.timeout,
        args.require_report_plots,
        Path(args.ingest_pdf).resolve() if args.ingest_pdf else None,
    )


if __name__ == "__main__":
    sys.exit(main())
