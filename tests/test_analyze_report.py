"""What report.html and its pictures say, as a user reads them: the keep-rate curves count the samples
the run's funnel counts, sizes read as sizes, values either side of a bound read apart, no label
sits on another, and `djx analyze --open` / `djx process --report` lead to the page."""
from __future__ import annotations

import itertools
import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from djx.analyze import analyze
from djx.core.io.outputs import OutputPaths
from djx.tools.make_analysis_outputs import run_ops, write_outputs

REPO_DIR = Path(__file__).resolve().parent.parent
ASSETS = str(REPO_DIR / "tests" / "assets")
IMAGES = sorted(os.listdir(REPO_DIR / "tests" / "assets" / "demo" / "images"))
MB, KB = 1024 ** 2, 1024


def _quiet(*_a):
    pass


def _write_run(export: Path, ops: list[str], kept: list[dict], dropped: list[tuple[int, dict]]) -> None:
    """Hand-written outputs of a run: kept stats, (op index, stats) of dropped samples, its summary."""
    paths = OutputPaths.for_export(str(export))
    pos = itertools.count()
    image = lambda i: [f"images/{IMAGES[i % len(IMAGES)]}"]  # noqa: E731
    with open(paths.export, "w") as f:
        for s in kept:
            i = next(pos)
            f.write(json.dumps({"text": f"k{i}", "images": image(i), "__dj__pos__": i, "__dj__stats__": s}) + "\n")
    with open(paths.dropped, "w") as f:
        for at, s in dropped:
            i = next(pos)
            f.write(json.dumps({"text": f"d{i}", "images": image(i), "__dj__pos__": i, "__dj__stats__": s,
                                "__dj__drop__": {"op": ops[at], "op_index": at, "reason": "out of range"}}) + "\n")
    open(paths.rejected, "w").close()
    n = len(kept) + len(dropped)
    with open(paths.summary, "w") as f:
        json.dump({"input": n, "kept": len(kept), "dropped": len(dropped), "rejected": 0,
                   "dataset_path": str(REPO_DIR / "tests" / "assets" / "demo" / "demo.jsonl"),
                   "ops": [{"name": op, "in": n, "kept": len(kept), "dropped": len(dropped), "rejected": 0, "seconds": 0.0}
                           for op in ops]}, f)


@pytest.mark.slow
def test_keep_rate_curves_count_the_samples_the_funnel_counts(tmp_path):
    """Samples an op rejects (an undecodable image) reached it: "the N samples reaching it" is the
    summary's `in` of that op, in the curve, in its table and in the funnel, and none of them is kept."""
    export = tmp_path / "run.jsonl"
    summary = write_outputs(str(export), 3000, seed=5, assets=ASSETS, reject_at=1)
    assert summary["ops"][1]["rejected"] > 0
    result = analyze(str(export), ops=run_ops(ASSETS), log=_quiet)
    html = Path(result.report).read_text()
    shown = [int(n) for n in re.findall(r'class="n-reached">(\d+)<', html)]
    funnel = [int(n) for n in re.findall(r'<td class="n">\d+</td><td>[a-z_]+</td><td class="n">(\d+)</td>', html)]
    want = [o["in"] for o in summary["ops"]]
    assert [c["reached"] for c in result.curves] == shown == funnel == want
    # the aspect-ratio filter's bounds alone keep what it kept: its rejected samples at no bound
    at = result.curves[1]["readouts"]["at_bounds"]
    t = summary["ops"][1]
    assert min(rate for _, _, rate in at) >= t["kept"] / t["in"] - 1e-9
    assert all(rate <= (t["in"] - t["rejected"]) / t["in"] for _, _, rate in at)


def test_sizes_read_as_sizes(tmp_path):
    from djx.analyze.plots import curve_png, histogram_png
    from djx.ops.filter.image_size_filter import ImageSizeFilter
    export = tmp_path / "run.jsonl"
    sizes = [MB * k / 4 for k in range(1, 40)]
    _write_run(export, ["image_size_filter"], [{"image_sizes": [s]} for s in sizes if 5 * MB <= s <= 8 * MB],
               [(0, {"image_sizes": [s]}) for s in sizes if not 5 * MB <= s <= 8 * MB])
    ops = [ImageSizeFilter(min_size="5MB", max_size="8MB")]
    printed = []
    result = analyze(str(export), ops=ops, log=printed.append)
    row = next(line for line in printed[0].splitlines() if line.startswith("image_sizes"))
    assert "e+" not in row and " MB" in row  # the printed stats table too
    html = Path(result.report).read_text()
    assert "image_size_filter.min_size = 5 MB" in html and "image_size_filter.max_size = 8 MB" in html
    assert not re.search(r"\de[+-]\d", html)  # no 5.24288e+06 anywhere on the page
    for_target = re.findall(r'<td class="n">([^<]*)</td></tr>', html.split('id="rejections"')[0].split('id="curves"')[1])
    assert for_target and all(re.fullmatch(r"[0-9.]+ (B|KB|MB|GB)|[0-9.]+%|–", v) for v in for_target), for_target
    col = result.collector
    bounds = list(result.curves[0]["bounds"])
    figs = [histogram_png("image_sizes", col.stats["image_sizes"], bounds, "image_size_filter", None, True),
            curve_png(col.curves[(0, "image_sizes")], bounds, [0.5, 0.5], None, True)]
    for fig in figs:
        ax = fig.axes[0]
        ticks = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
        assert ticks and all(re.fullmatch(r"\d+(\.\d+)? (B|KB|MB)", t) for t in ticks), ticks
        labels = [t.get_text() for t in ax.texts]
        assert any("min_size=5 MB" in x for x in labels) and any("max_size=8 MB" in x for x in labels), labels


def test_values_either_side_of_a_bound_read_apart(tmp_path):
    """0.2999999 and 0.3000001 around min_ratio 0.3: each printed value reads on its own side."""
    from djx.ops.filter.image_aspect_ratio_filter import ImageAspectRatioFilter
    export = tmp_path / "run.jsonl"
    below = [0.3 - k * 1e-7 for k in range(1, 4)]
    above = [0.3 + k * 1e-7 for k in range(0, 3)] + [1.0]
    _write_run(export, ["image_aspect_ratio_filter"], [{"aspect_ratios": [v]} for v in above],
               [(0, {"aspect_ratios": [v]}) for v in below])
    result = analyze(str(export), ops=[ImageAspectRatioFilter(min_ratio=0.3)], log=_quiet)
    html = Path(result.report).read_text()
    gallery = html.split('id="galleries"')[1]
    dropped, kept = gallery.split("kept by this bound")
    shown = {"dropped": re.findall(r"aspect_ratios = <b>([^<]+)</b>", dropped),
             "kept": re.findall(r"aspect_ratios = <b>([^<]+)</b>", kept)}
    assert len(shown["dropped"]) == 3 and len(shown["kept"]) == 4
    assert all(float(v) < 0.3 for v in shown["dropped"]) and all(float(v) >= 0.3 for v in shown["kept"])
    assert len(set(shown["dropped"] + shown["kept"])) == 7  # seven values, seven readings
    assert re.search(r"image_aspect_ratio_filter\.min_ratio = 0\.3<", gallery)
    metas = re.findall(r"aspect_ratios: \[([^\]]+)\]", gallery)  # each card's stats line
    assert sorted(float(m) for m in metas) == sorted(below + above)


def _boxes(fig) -> dict:
    fig.canvas.draw()  # as saved: every label where it is drawn
    r = fig.canvas.get_renderer()
    ax = fig.axes[0]
    boxes = {"title": ax.title, "xlabel": ax.xaxis.label, "ylabel": ax.yaxis.label, "legend": ax.get_legend()}
    boxes.update({f"bound {i}": t for i, t in enumerate(ax.texts)})
    return {name: a.get_window_extent(r) for name, a in boxes.items() if a is not None and a.get_visible()}


@pytest.mark.slow
def test_no_label_of_a_picture_sits_on_another(tmp_path):
    """Legend, title, axis labels and the bounds' labels of every picture: no two overlap, nor a bound's
    label the legend; close bounds (0.5 and 0.52) included, and the pictures stay inside the figure."""
    from djx.analyze.plots import curve_png, histogram_png
    from djx.ops.filter.image_aspect_ratio_filter import ImageAspectRatioFilter
    export = tmp_path / "run.jsonl"
    write_outputs(str(export), 2000, seed=2, assets=ASSETS)
    ops = run_ops(ASSETS)
    ops[1] = ImageAspectRatioFilter(min_ratio=0.5, max_ratio=0.52)
    result = analyze(str(export), ops=ops, log=_quiet)
    col = result.collector
    figs = []
    for c in result.curves:
        rates = [r for _, _, r in c["readouts"]["at_bounds"]]
        figs.append(curve_png(c["curve"], c["bounds"], rates, None))
        figs.append(histogram_png(c["stat"], col.stats[c["stat"]], c["bounds"], c["op"], None))
    for fig in figs:
        boxes = _boxes(fig)
        for (a, ba), (b, bb) in itertools.combinations(boxes.items(), 2):
            assert not ba.overlaps(bb), (fig.axes[0].get_title(), a, b)
        whole = fig.bbox
        for name, box in boxes.items():
            assert box.x0 >= whole.x0 - 1 and box.x1 <= whole.x1 + 1 and box.y0 >= whole.y0 - 1, name


def _recording_browser(tmp_path: Path) -> tuple[str, Path]:
    got = tmp_path / "opened.txt"
    script = tmp_path / "browser.sh"
    script.write_text(f'#!/bin/sh\nprintf "%s" "$1" > "{got}"\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script), got


@pytest.mark.slow
def test_analyze_open_hands_the_report_to_the_browser_and_process_report_ends_with_its_path(tmp_path):
    djx = str(Path(sys.executable).parent / "djx")
    export = tmp_path / "run.jsonl"
    write_outputs(str(export), 200, seed=1, assets=ASSETS)
    browser, got = _recording_browser(tmp_path)
    env = dict(os.environ, BROWSER=browser)
    proc = subprocess.run([djx, "analyze", str(export), "--open"], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    report = tmp_path / "run.analysis" / "report.html"
    assert got.read_text() == report.resolve().as_uri()
    # no browser at all: the command still succeeds and says where the page is
    env = dict(os.environ, BROWSER=str(tmp_path / "no-such-browser"), PATH="/nonexistent", DISPLAY="",
               WAYLAND_DISPLAY="")
    proc = subprocess.run([djx, "analyze", str(export), "--open"], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert report.resolve().as_uri() in proc.stdout and str(report) in proc.stdout
    recipe = tmp_path / "r.yaml"
    recipe.write_text(f"dataset_path: {REPO_DIR / 'tests/assets/demo/demo.jsonl'}\nexport_path: {tmp_path / 'out' / 'p.jsonl'}\n"
                      "np: 1\nprocess:\n  - text_length_filter: {min_len: 30}\n")
    proc = subprocess.run([djx, "process", str(recipe), "--report", "--quiet"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    last = proc.stdout.strip().splitlines()[-1]
    assert Path(last).name == "report.html" and Path(last).is_file() and Path(last).parent.name == "p.analysis"


@pytest.mark.slow
def test_a_llava_run_s_report_shows_its_samples_with_their_images(tmp_path):
    """LLaVA records keep their image under `image` and their text in `conversations`: the first
    screen and the galleries read them as the run did (the recipe recorded in the summary)."""
    import shutil
    from djx import Pipeline
    for name in IMAGES[:4]:
        shutil.copy(REPO_DIR / "tests" / "assets" / "demo" / "images" / name, tmp_path / name)
    rows = [{"id": str(i), "image": name, "conversations": [
        {"from": "human", "value": "<image>\nWhat is this?"}, {"from": "gpt", "value": f"picture {i} " + "x" * (40 * i)}]}
        for i, name in enumerate(IMAGES[:4])]
    (tmp_path / "llava.json").write_text(json.dumps(rows))
    summary = Pipeline(dataset_path=str(tmp_path / "llava.json"), dataset_format="llava", image_special_token="<image>",
                       process=[{"text_length_filter": {"max_len": 120}}]).run(
        export_path=str(tmp_path / "out" / "o.json"), progress=False, log=_quiet)
    assert summary["kept"] == 2 and summary["dropped"] == 2
    result = analyze(str(tmp_path / "out" / "o.json"), log=_quiet)
    for kind, want in (("kept", rows[:2]), ("dropped", rows[2:])):
        items = result.collector.first[kind]
        assert [os.path.basename(i["images"][0]) for i in items] == [r["image"] for r in want], kind
        assert all("What is this?" in i["text"] for i in items)
    html = Path(result.report).read_text()
    assert html.count("thumbs/") >= 4 and "none with images" not in html


def _first_screen(html: str) -> str:
    return html[html.index('<section id="first-screen">'):html.index("</section>")]


@pytest.mark.slow
def test_the_first_screen_says_how_many_more_ops_dropped_and_that_nothing_was_kept(tmp_path):
    """Seven filters dropped samples: the top five are listed, then "and 2 more" with their samples;
    a run that kept nothing says so, and why, before anything else."""
    ops = [f"text_length_filter_{i}" for i in range(7)]
    export = tmp_path / "run.jsonl"
    _write_run(export, ops, [], [(i, {"text_len": i}) for i in range(7) for _ in range(7 - i)])
    path = Path(OutputPaths.for_export(str(export)).summary)
    summary = json.loads(path.read_text())
    for i, op in enumerate(summary["ops"]):  # the funnel: op i dropped 7 - i of the 28
        seen = 28 - sum(7 - j for j in range(i))
        op.update({"in": seen, "dropped": 7 - i, "kept": seen - (7 - i)})
    path.write_text(json.dumps(summary))
    html = _first_screen(Path(analyze(str(export), log=_quiet).report).read_text())
    assert len(re.findall(r'class="drop-reason"', html)) == 5
    assert re.search(r'id="more-drops".*?and 2 more ops.*?<td class="n">3</td>', html, re.S)
    assert re.search(r'id="nothing-kept".*?Nothing was kept.*?0\. text_length_filter_0 dropped 7', html, re.S)
    # a model filter that dropped all of many: the terminal's warning, on the first screen
    summary["ops"][0]["uses_model"] = True
    path.write_text(json.dumps(summary))
    html = _first_screen(Path(analyze(str(export), log=_quiet).report).read_text())
    assert "the run kept none of its 28 samples; text_length_filter_0 dropped 7 of the 28 it saw" in html
