"""report.html in a real headless browser (Debian's chromium, driven by Playwright): it loads from
disk without console errors or network, shows every stat of the recipe, and its pictures load.

Without chromium (or the playwright package) the test says what to install and skips; with
DJX_REQUIRE_BROWSER=1 (set by .ci/run) a missing browser fails it.
"""
from __future__ import annotations

import json
import os
import shutil

import pytest
import yaml

from pathlib import Path

from djx.tools.make_analysis_outputs import recipe_text, run_ops, write_outputs

pytestmark = pytest.mark.slow  # a headless browser

ASSETS = str(Path(__file__).resolve().parent / "assets")  # the tests' own data, wherever djx is installed

CHROMIUM = os.environ.get("DJX_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def _browser_or_say_why():
    """The playwright module, or a skip (a failure under DJX_REQUIRE_BROWSER=1) saying what is missing."""
    missing = []
    if not os.path.exists(CHROMIUM):
        missing.append(f"chromium ({CHROMIUM}): apt-get install -y chromium, or set DJX_CHROMIUM")
    try:
        from playwright import sync_api
    except ImportError:
        sync_api = None
        missing.append("the playwright package: pip install '.[test]'")
    if missing:
        why = "the report's browser test needs " + " and ".join(missing)
        if os.environ.get("DJX_REQUIRE_BROWSER") == "1":
            pytest.fail(why)
        pytest.skip(why)
    return sync_api


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """A run's outputs (3,000 samples, demo images) analyzed through the CLI with their recipe."""
    from djx.cli import main
    folder = tmp_path_factory.mktemp("report")
    export = folder / "run.jsonl"
    write_outputs(str(export), 3000, seed=5, assets=ASSETS)
    recipe = folder / "run.yaml"
    recipe.write_text(recipe_text(str(export), ASSETS))
    assert main(["analyze", str(export), "--recipe", str(recipe)]) == 0
    return folder / "run.analysis" / "report.html", recipe


def test_report_renders_offline_with_every_stat_and_its_pictures(report, tmp_path):
    sync_api = _browser_or_say_why()
    page_path, recipe = report
    stats = {s for op in run_ops(ASSETS) for s in op.stats_keys}
    errors, requests = [], []
    with sync_api.sync_playwright() as pw:
        ctx = pw.chromium.launch_persistent_context(str(tmp_path / "profile"), executable_path=CHROMIUM,
                                                    headless=True, args=ARGS)
        try:
            page = ctx.new_page()
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on("request", lambda r: requests.append(r.url))
            page.on("requestfailed", lambda r: errors.append(f"failed: {r.url}"))
            page.goto(page_path.as_uri(), wait_until="load")
            shown_stats = set(page.eval_on_selector_all("#stats-table tr.stat-row", "rows => rows.map(r => r.dataset.stat)"))
            plotted = set(page.eval_on_selector_all("figure[data-stat]", "fs => fs.map(f => f.dataset.stat)"))
            curves = page.eval_on_selector_all("div.curve", "ds => ds.map(d => d.dataset.op + ' ' + d.dataset.stat)")
            images = page.eval_on_selector_all(
                "img", "imgs => imgs.map(i => ({src: i.getAttribute('src'), ok: i.complete && i.naturalWidth > 0, "
                       "cls: i.className}))")
            bounds = page.eval_on_selector_all("div.threshold", "ds => ds.map(d => d.dataset.param)")
            funnel = page.inner_text("#funnel + table")
        finally:
            ctx.close()
    assert errors == []
    assert all(u.startswith(("file://", "data:")) for u in requests), requests  # nothing from a network
    assert shown_stats == plotted == stats
    assert len(curves) == len(stats)
    thumbs = [i for i in images if i["cls"] == "thumb"]
    assert thumbs and len(images) == len(thumbs) + 2 * len(stats)
    assert [i["src"] for i in images if not i["ok"]] == []
    assert {"min_len", "min_ratio", "max_ratio", "min_score"} <= set(bounds)
    ops = [list(p)[0] for p in yaml.safe_load(recipe.read_text())["process"]]
    assert all(op in funnel for op in ops)


_TEXT_BOXES = """() => {
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  const boxes = [];
  for (let n = walker.nextNode(), i = 0; n; n = walker.nextNode(), i++) {
    if (!n.textContent.trim()) continue;
    const range = document.createRange();
    range.selectNodeContents(n);
    for (const r of range.getClientRects())
      if (r.width > 0 && r.height > 0)
        boxes.push({i, text: n.textContent.trim().slice(0, 40), x0: r.left + scrollX, x1: r.right + scrollX,
                    y0: r.top + scrollY, y1: r.bottom + scrollY});
  }
  const hits = [];
  for (let a = 0; a < boxes.length && hits.length < 5; a++)
    for (let b = a + 1; b < boxes.length; b++) {
      const p = boxes[a], q = boxes[b];
      if (p.i !== q.i && Math.min(p.x1, q.x1) - Math.max(p.x0, q.x0) > 1 && Math.min(p.y1, q.y1) - Math.max(p.y0, q.y0) > 1)
        hits.push([p.text, q.text]);
    }
  return {n: boxes.length, hits, scroll: document.documentElement.scrollWidth, inner: innerWidth};
}"""


@pytest.mark.parametrize("width", [1400, 800])
def test_no_text_sits_on_other_text_and_nothing_spills_sideways(report, tmp_path, width):
    sync_api = _browser_or_say_why()
    page_path, _ = report
    with sync_api.sync_playwright() as pw:
        ctx = pw.chromium.launch_persistent_context(str(tmp_path / "profile"), executable_path=CHROMIUM,
                                                    headless=True, args=ARGS,
                                                    viewport={"width": width, "height": 900})
        try:
            page = ctx.new_page()
            page.goto(page_path.as_uri(), wait_until="load")
            got = page.evaluate(_TEXT_BOXES)
            page.screenshot(path=str(tmp_path / f"report-{width}.png"), full_page=False)
        finally:
            ctx.close()
    assert got["n"] > 100  # the page's text was measured
    assert got["hits"] == []
    assert got["scroll"] <= got["inner"] == width


def test_the_first_screen_says_what_was_kept_dropped_rejected_and_why(report, tmp_path):
    sync_api = _browser_or_say_why()
    page_path, _ = report
    summary = json.loads((page_path.parent.parent / "run.summary.json").read_text())
    with sync_api.sync_playwright() as pw:
        ctx = pw.chromium.launch_persistent_context(str(tmp_path / "profile"), executable_path=CHROMIUM,
                                                    headless=True, args=ARGS, viewport={"width": 1400, "height": 900})
        try:
            page = ctx.new_page()
            page.goto(page_path.as_uri(), wait_until="load")
            counts = {k: int(page.inner_text(f"#n-{k}")) for k in ("kept", "dropped", "rejected")}
            first_plot = page.evaluate("document.querySelector('img.plot').getBoundingClientRect().top + scrollY")
            screen = page.evaluate("document.querySelector('#first-screen').getBoundingClientRect().bottom + scrollY")
            drops = page.eval_on_selector_all("#top-drops tr.drop-reason",
                                              "rs => rs.map(r => [r.dataset.op, +r.cells[1].innerText])")
            codes = page.eval_on_selector_all("#top-codes tr.rejection-code",
                                              "rs => rs.map(r => [r.dataset.code, +r.cells[1].innerText, r.cells[2].innerText])")
            thumbs = {kind: page.eval_on_selector_all(
                f"#first-{kind} figure.sample", "fs => fs.map(f => ({ok: !!f.querySelector('img') && "
                "f.querySelector('img').complete && f.querySelector('img').naturalWidth > 0, caption: "
                "f.querySelector('figcaption').innerText}))") for kind in ("kept", "dropped")}
        finally:
            ctx.close()
    assert counts == {k: summary[k] for k in counts}
    assert screen < first_plot  # all of it before any plot
    funnel = {o["name"]: o["dropped"] for o in summary["ops"]}
    assert drops and all(funnel[op] == n for op, n in drops)
    assert sorted(drops, key=lambda d: -d[1]) == drops and sum(n for _, n in drops) == summary["dropped"]
    assert [(c, n) for c, n, _ in codes] == sorted(summary["rejected_by_code"].items(), key=lambda cn: -cn[1])
    assert all(reason.startswith("cannot read images/") for _, _, reason in codes)
    for kind in ("kept", "dropped"):
        assert 1 <= len(thumbs[kind]) <= 4 and all(t["ok"] and t["caption"].startswith("#") for t in thumbs[kind])
    assert all("outside the kept range" in t["caption"] for t in thumbs["dropped"])  # why each was dropped
