"""`djx analyze` over a run's outputs: the stats table against numpy/pandas, histograms, keep-rate
curves that agree with what the filters did, galleries, and `report: true` at the end of a run."""
from __future__ import annotations

import csv
import json
import shutil
import os
from pathlib import Path

import numpy as np
import pytest

from djx.analyze import analyze
from djx.tools.make_analysis_outputs import run_ops, write_outputs

REPO_DIR = Path(__file__).resolve().parent.parent
DEMO = REPO_DIR / "configs" / "demo.yaml"
ASSETS = str(REPO_DIR / "tests" / "assets")  # the tests' own data, wherever djx is installed
DEMO_STATS = {"text_len", "image_width", "image_height", "aspect_ratios", "image_text_similarity",
              "image_text_matching_score"}


def _values(paths) -> dict[str, list[float]]:
    """Every stat's values over the given outputs, read the plain way (list stats flattened)."""
    out: dict[str, list[float]] = {}
    for path in paths:
        with open(path) as f:
            for line in f:
                for k, v in json.loads(line)["__dj__stats__"].items():
                    out.setdefault(k, []).extend(v if isinstance(v, list) else [v])
    return out


def _stats_csv(path) -> dict[str, dict[str, float]]:
    with open(path, newline="") as f:
        return {row.pop("stat"): {k: float(v) for k, v in row.items()} for row in csv.DictReader(f)}


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    """The outputs of a 20,000-sample run (written directly), analyzed with its ops."""
    export = tmp_path_factory.mktemp("gen") / "run.jsonl"
    summary = write_outputs(str(export), 20_000, seed=3, assets=ASSETS)
    ops = run_ops(ASSETS)
    result = analyze(str(export), ops=ops, log=lambda *a: None)
    return export, summary, ops, result


@pytest.mark.slow
def test_stats_csv_of_a_large_output_agrees_with_pandas_describe(generated):
    import pandas as pd
    export, _, _, result = generated
    table = _stats_csv(Path(result.out_dir) / "stats.csv")
    values = _values([export, str(export).replace(".jsonl", ".dropped.jsonl")])
    assert set(table) == set(values) == {"text_len", "aspect_ratios", "image_text_similarity"}
    for stat, vals in values.items():
        want = pd.Series(vals).describe()
        got = table[stat]
        assert got["count"] == want["count"] and got["min"] == want["min"] and got["max"] == want["max"]
        assert got["mean"] == pytest.approx(want["mean"], rel=1e-9)
        assert got["std"] == pytest.approx(want["std"], rel=1e-9)
        for q in ("25%", "50%", "75%"):
            assert abs(got[q] - want[q]) <= 0.01 * (want["max"] - want["min"]), (stat, q)


@pytest.mark.slow
def test_keep_rate_at_each_bound_is_what_the_filter_kept(generated):
    export, summary, _, result = generated
    tallies = {o["name"]: o for o in summary["ops"]}
    curves = {c["op"]: c for c in result.curves}
    for op in ("text_length_filter", "image_text_similarity_filter"):  # one effective bound each
        (label, side, rate), = [b for b in curves[op]["readouts"]["at_bounds"] if b[1] == "min"]
        t = tallies[op]
        assert rate == pytest.approx(t["kept"] / t["in"], abs=0.002), label
    # a bound on a list stat alone, under any_or_all=any: a sample meets min_ratio when its widest
    # image does, max_ratio when its narrowest does; over the samples reaching the filter
    reaching = [r["__dj__stats__"]["aspect_ratios"] for path in (export, str(export).replace(".jsonl", ".dropped.jsonl"))
                for r in map(json.loads, open(path)) if "aspect_ratios" in r["__dj__stats__"]]
    want = {"min": np.mean([max(v) >= 0.5 for v in reaching]), "max": np.mean([min(v) <= 2.0 for v in reaching])}
    rates = {side: r for _, side, r in curves["image_aspect_ratio_filter"]["readouts"]["at_bounds"]}
    assert rates == pytest.approx(want, abs=1e-12)
    # the histograms tell the filter's own drops from later ones
    text_len = result.collector.stats["text_len"]
    assert text_len["dropped_here"].n == tallies["text_length_filter"]["dropped"] < text_len["dropped"].n
    assert curves["image_aspect_ratio_filter"]["reached"] == tallies["image_aspect_ratio_filter"]["in"]


@pytest.mark.slow
def test_galleries_hold_the_samples_nearest_each_bound(generated):
    export, _, ops, result = generated
    dropped = [json.loads(line) for line in open(str(export).replace(".jsonl", ".dropped.jsonl"))]
    gallery = next(g for g in result.collector.galleries if g.threshold.param == "min_score")
    by_sim = sorted((max(r["__dj__stats__"]["image_text_similarity"]) for r in dropped
                     if r["__dj__drop__"]["op"] == "image_text_similarity_filter"), reverse=True)
    shown = [item["value"] for item in gallery.items("dropped")]
    assert shown == by_sim[:len(shown)] and len(shown) == gallery.k
    assert all(item["reason"] and item["images"] for item in gallery.items("dropped"))
    kept = gallery.items("kept")
    assert len(kept) == gallery.k and all(item["value"] >= 0.2 for item in kept)


@pytest.mark.slow
def test_rejections_are_counted_by_code_with_examples(generated):
    _, summary, _, result = generated
    col = result.collector
    assert col.rejected == summary["rejected"] > 0
    assert dict(col.rejected_by_code) == {"bad_image": summary["rejected"]}
    assert 0 < len(col.rejection_examples["bad_image"]) <= 3
    html = Path(result.report).read_text()
    assert "bad_image" in html and "Funnel" in html


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    """The demo recipe run with --report through the CLI (tiny CLIP and BLIP, 100 samples)."""
    from djx.cli import main
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    out = tmp_path_factory.mktemp("demo")
    export = out / "demo.jsonl"
    assert main(["process", str(DEMO), "--export-path", str(export), "--quiet", "--report"]) == 0
    return export


@pytest.mark.slow
@pytest.mark.models
def test_report_flag_writes_the_analysis_next_to_the_export(demo_run):
    folder = demo_run.parent / "demo.analysis"
    table = _stats_csv(folder / "stats.csv")
    assert set(table) == DEMO_STATS
    for stat in DEMO_STATS:
        assert (folder / f"hist_{stat}.png").stat().st_size > 1000
    curves = sorted(p.name for p in folder.glob("keep_rate_*.png"))
    assert len(curves) == 6 and all(f"_{s}.png" in " ".join(curves) for s in DEMO_STATS)
    html = (folder / "report.html").read_text()
    assert "http://" not in html and "https://" not in html  # nothing to fetch: opens offline
    assert html.count('class="card"') > 0 and list((folder / "thumbs").glob("*.jpg"))


@pytest.mark.slow
@pytest.mark.models
def test_analyze_cli_agrees_with_the_run_summary(demo_run, djx_cli, tmp_path):
    res = djx_cli("analyze", demo_run, "--recipe", DEMO, "--out", tmp_path / "a")
    assert res.rc == 0, res.err
    assert "image_text_similarity" in res.out and "count" in res.out  # the table is printed
    summary = json.loads((demo_run.parent / "demo.summary.json").read_text())
    table = _stats_csv(tmp_path / "a" / "stats.csv")
    values = _values([demo_run, demo_run.parent / "demo.dropped.jsonl"])
    for stat in DEMO_STATS:  # small: every figure exact
        assert table[stat]["count"] == len(values[stat])
        assert table[stat]["50%"] == pytest.approx(float(np.percentile(values[stat], 50)), rel=1e-12)
    rates = {}
    with open(tmp_path / "a" / "keep_rate.csv", newline="") as f:
        for row in csv.DictReader(f):
            rates.setdefault((row["op"], row["side"]), []).append(float(row["keep_rate"]))
    sim = rates[("image_text_similarity_filter", "min")]
    assert sim[0] == 1.0 and sim[-1] < 0.05 and sorted(sim, reverse=True) == sim
    ops = {o["name"]: o for o in summary["ops"]}
    # the demo's CLIP bound kept 68 of the 85 samples reaching it; the report says so
    html = (tmp_path / "a" / "report.html").read_text()
    t = ops["image_text_similarity_filter"]
    assert f"{t['kept'] / t['in']:.1%}" in html


@pytest.mark.slow
@pytest.mark.models
def test_analyze_without_a_recipe_uses_the_one_the_summary_recorded(demo_run, djx_cli, tmp_path):
    res = djx_cli("analyze", demo_run, "--out", tmp_path / "a")
    assert res.rc == 0, res.err
    assert set(_stats_csv(tmp_path / "a" / "stats.csv")) == DEMO_STATS
    html = (tmp_path / "a" / "report.html").read_text()
    assert 'id="no-recipe"' not in html and 'class="threshold"' in html
    # a summary that records no recipe (an older run): the stats' filters from its op names, no thresholds
    run = tmp_path / "old"
    shutil.copytree(demo_run.parent, run, ignore=shutil.ignore_patterns("*.analysis"))
    summary = json.loads((run / "demo.summary.json").read_text())
    del summary["recipe"]
    (run / "demo.summary.json").write_text(json.dumps(summary))
    res = djx_cli("analyze", run / "demo.jsonl", "--out", tmp_path / "b")
    assert res.rc == 0, res.err
    html = (tmp_path / "b" / "report.html").read_text()
    assert 'id="no-recipe"' in html and 'class="threshold"' not in html
    assert len(list((tmp_path / "b").glob("keep_rate_*.png"))) == 6  # stats' filters from the summary


def test_bad_outputs_are_clear_errors(tmp_path, djx_cli):
    res = djx_cli("analyze", tmp_path / "missing.jsonl")
    assert res.rc == 1 and "no such output" in res.err and "Traceback" not in res.err
    damaged = tmp_path / "cut.jsonl"
    damaged.write_text('{"text": "a", "__dj__stats__": {"text_len": 1}}\n{"text": "b", "__dj__st')
    res = djx_cli("analyze", damaged)
    assert res.rc == 1 and "cut.jsonl, line 2" in res.err


def test_ray_outputs_are_analyzed_the_same_way(tmp_path, write_recipe, djx_cli, ray_address):
    # joins the session's Ray cluster: a Ray started and shut down inside the test process would
    # leave state that breaks the clusters later test modules start
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path=str(REPO_DIR / "tests/assets/demo/demo.jsonl"),
                          export_path=str(tmp_path / "out" / "ray.jsonl"), executor="ray", np=1,
                          ray_address=ray_address,
                          report=True, process=[{"text_length_filter": {"min_len": 30}},
                                                {"image_shape_filter": {"min_width": 64, "min_height": 64}}])
    res = djx_cli("process", recipe, "--quiet")
    assert res.rc == 0, res.err
    folder = tmp_path / "out" / "ray.analysis"
    assert set(_stats_csv(folder / "stats.csv")) == {"text_len", "image_width", "image_height"}
    assert _stats_csv(folder / "stats.csv")["text_len"]["count"] == 100
    html = (folder / "report.html").read_text()
    assert "image_shape_filter.min_width = 64" in html and "text_length_filter.min_len = 30" in html


@pytest.mark.slow  # over a second: the full suite's (docs/development.md)
def test_a_parquet_export_is_analyzed(tmp_path, write_recipe, djx_cli):
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path=str(REPO_DIR / "tests/assets/demo/demo.jsonl"),
                          export_path=str(tmp_path / "out" / "p.parquet"), np=1,
                          process=[{"text_length_filter": {"min_len": 30}}])
    assert djx_cli("process", recipe, "--quiet").rc == 0
    res = djx_cli("analyze", tmp_path / "out" / "p.parquet", "--recipe", recipe)
    assert res.rc == 0, res.err
    table = _stats_csv(tmp_path / "out" / "p.analysis" / "stats.csv")
    assert table["text_len"]["count"] == 100  # kept (parquet) + dropped
    again = djx_cli("process", recipe, "--restart")  # new outputs, the analysis beside them is the old one's
    assert again.rc == 0 and f"note: {tmp_path / 'out' / 'p.analysis'} holds the analysis of an earlier run" in again.out


def test_outputs_of_an_unknown_plugin_filter_are_summarised_without_thresholds(tmp_path, write_jsonl, djx_cli):
    kept = [{"text": f"t{i}", "__dj__pos__": i, "__dj__stats__": {"lang": "en", "lang_score": i / 10, "flags": [i, 2 * i]}}
            for i in range(10)]
    write_jsonl(tmp_path / "o.jsonl", kept)
    write_jsonl(tmp_path / "o.dropped.jsonl", [{"text": "x", "__dj__pos__": 10, "__dj__stats__": {"lang": "de", "lang_score": 0.01},
                                                "__dj__drop__": {"op": "my_lang_filter", "op_index": 0, "reason": "lang"}}])
    res = djx_cli("analyze", tmp_path / "o.jsonl")
    assert res.rc == 0, res.err
    table = _stats_csv(tmp_path / "o.analysis" / "stats.csv")
    assert set(table) == {"lang_score", "flags"} and table["lang_score"]["count"] == 11
    assert table["flags"]["max"] == 18 and "note: stats without numeric values are not summarised: lang" in res.out
    html = (tmp_path / "o.analysis" / "report.html").read_text()
    assert 'class="curve"' not in html and "lang_score" in html  # no op known: no curve, no line


def test_a_report_that_cannot_be_written_fails_the_run_after_its_outputs(tmp_path, write_recipe, djx_cli):
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path=str(REPO_DIR / "tests/assets/demo/demo.jsonl"),
                          export_path=str(tmp_path / "out" / "t.jsonl"), np=1, report=True,
                          process=[{"text_length_filter": {"min_len": 30}}])
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "t.analysis").write_text("a file where the analysis folder goes")
    res = djx_cli("process", recipe, "--quiet")
    assert res.rc == 1 and "outputs are written, but its report could not be" in res.err
    assert "t.analysis" in res.err and "Traceback" not in res.err
    assert (tmp_path / "out" / "t.jsonl").exists() and (tmp_path / "out" / "t.summary.json").exists()


@pytest.mark.slow
def test_sharded_export_with_stats_beside_it_is_analyzed(tmp_path, write_recipe, djx_cli):
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path=str(REPO_DIR / "tests/assets/demo/demo.jsonl"),
                          export_path=str(tmp_path / "out" / "s.jsonl"), np=1, keep_stats_in_res_ds=False,
                          export_shard_size=4000, process=[{"text_length_filter": {"min_len": 60}}])
    assert djx_cli("process", recipe, "--quiet").rc == 0
    assert not (tmp_path / "out" / "s.jsonl").exists()  # shards, and the stats in s_stats.jsonl
    res = djx_cli("analyze", tmp_path / "out" / "s.jsonl", "--recipe", recipe)
    assert res.rc == 0, res.err
    table = _stats_csv(tmp_path / "out" / "s.analysis" / "stats.csv")
    summary = json.loads((tmp_path / "out" / "s.summary.json").read_text())
    assert table["text_len"]["count"] == summary["kept"] + summary["dropped"] == 100


def test_a_plugin_filter_gets_its_thresholds_from_its_parameters(tmp_path, write_recipe, djx_cli, plugin_site):
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path=str(REPO_DIR / "tests/assets/demo/demo.jsonl"),
                          export_path=str(tmp_path / "out" / "v.jsonl"), np=1, start_method="fork",
                          custom_ops=["djx_test_plugin_ops"], process=[{"vowel_ratio_filter": {"max_ratio": 0.3}}])
    assert djx_cli("process", recipe, "--quiet").rc == 0
    res = djx_cli("analyze", tmp_path / "out" / "v.jsonl", "--recipe", recipe)
    assert res.rc == 0, res.err
    html = (tmp_path / "out" / "v.analysis" / "report.html").read_text()
    summary = json.loads((tmp_path / "out" / "v.summary.json").read_text())
    op = summary["ops"][0]
    assert op["dropped"] > 0 and "vowel_ratio_filter.max_ratio = 0.3" in html
    assert f"{op['kept'] / op['in']:.1%}" in html  # the keep rate at the plug-in's own bound


def test_outputs_without_their_dropped_samples_say_what_the_figures_cover(tmp_path, write_recipe, djx_cli):
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path=str(REPO_DIR / "tests/assets/demo/demo.jsonl"),
                          export_path=str(tmp_path / "out" / "k.jsonl"), np=1, export_dropped=False,
                          process=[{"text_length_filter": {"min_len": 60}}])
    assert djx_cli("process", recipe, "--quiet").rc == 0
    res = djx_cli("analyze", tmp_path / "out" / "k.jsonl", "--recipe", recipe)
    assert res.rc == 0, res.err
    summary = json.loads((tmp_path / "out" / "k.summary.json").read_text())
    assert f"the run dropped {summary['dropped']} samples but" in res.out
    assert "covers the samples written only" in (tmp_path / "out" / "k.analysis" / "report.html").read_text()


def test_a_trial_run_is_analyzed_as_such(tmp_path, write_recipe, djx_cli):
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path=str(REPO_DIR / "tests/assets/demo/demo.jsonl"),
                          export_path=str(tmp_path / "out" / "t.jsonl"), np=1,
                          process=[{"text_length_filter": {"min_len": 60}}])
    assert djx_cli("process", recipe, "--quiet", "--limit", "40", "--report").rc == 0
    table = _stats_csv(tmp_path / "out" / "t.analysis" / "stats.csv")
    assert table["text_len"]["count"] == 40
    html = (tmp_path / "out" / "t.analysis" / "report.html").read_text()
    assert "a trial run (--limit 40): every figure covers its first 40 samples" in html


@pytest.mark.slow
def test_thumbnails_follow_image_paths_relative_to_the_export(tmp_path, write_recipe, djx_cli):
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path=str(REPO_DIR / "tests/assets/demo/demo.jsonl"),
                          export_path=str(tmp_path / "elsewhere" / "out" / "i.jsonl"), np=1, image_paths="relative",
                          process=[{"image_shape_filter": {"min_width": 64, "min_height": 64}}])
    assert djx_cli("process", recipe, "--quiet").rc == 0
    kept = [json.loads(line) for line in open(tmp_path / "elsewhere" / "out" / "i.jsonl")]
    assert kept[0]["images"][0].startswith("../")  # relative to the export's folder
    res = djx_cli("analyze", tmp_path / "elsewhere" / "out" / "i.jsonl", "--recipe", recipe)
    assert res.rc == 0, res.err
    html = (tmp_path / "elsewhere" / "out" / "i.analysis" / "report.html").read_text()
    assert 'class="thumb"' in html and "image not readable now" not in html
