"""`djx analyze` on outputs whose records carry thousands of stat names no op of the run computes:
it plots the run's stats, lists the others (capped, with a note) and stays bounded; stat names that
make one file name get files of their own, and names holding HTML are shown as text."""
from __future__ import annotations

import csv
import json
import re
import shutil
from pathlib import Path

import pytest

from helpers import write_jsonl_file

FOREIGN = 4_000  # stat names in the records that no op of the run computes (plus "everywhere")


def _add_stats(path: Path, extra, start: int = 0) -> int:
    """Add extra(i) to the stats of the i-th record of one output (i counted from `start`); -> records."""
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    for i, rec in enumerate(records, start):
        rec["__dj__stats__"].update(extra(i))
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return len(records)


def _foreign(i: int) -> dict:
    """"everywhere" in every record; f0000..f3999 each in one record of the 40."""
    return {"everywhere": 1.0, **{f"f{n:04d}": float(n) for n in range(i % 40, FOREIGN, 40)}}


@pytest.fixture(scope="module")
def real_run(tmp_path_factory) -> Path:
    """A real `djx process` run of text_length_filter over 40 texts, some dropped: r.yaml, out/o.*."""
    from djx.cli import main
    folder = tmp_path_factory.mktemp("run")
    write_jsonl_file(folder / "d.jsonl", [{"text": "word " * (i % 9)} for i in range(40)])
    (folder / "r.yaml").write_text(f"dataset_path: {folder / 'd.jsonl'}\nexport_path: {folder / 'out' / 'o.jsonl'}\n"
                                   f"np: 1\nprocess:\n  - text_length_filter: {{min_len: 10}}\n")
    assert main(["process", str(folder / "r.yaml"), "--quiet"]) == 0
    return folder


def _copy_outputs(real_run: Path, tmp_path: Path, extra) -> Path:
    """The run's outputs copied under tmp_path with extra(i) added to every record's stats; -> export."""
    out = tmp_path / "out"
    shutil.copytree(real_run / "out", out)
    n = _add_stats(out / "o.jsonl", extra)
    assert n + _add_stats(out / "o.dropped.jsonl", extra, start=n) == 40
    return out / "o.jsonl"


def _pngs(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.glob("*.png"))


def _listed(html: str) -> list[tuple[str, str]]:
    """The 'other stat names' table of report.html: (name, records carrying it)."""
    return re.findall(r'<tr class="other-stat"><td>([^<]*)</td><td class="n">(\d+)</td>', html)


def _csv_stats(folder: Path) -> list[str]:
    with open(folder / "stats.csv", newline="") as f:
        return [row["stat"] for row in csv.DictReader(f)]


@pytest.mark.parametrize("with_recipe", [True, False], ids=["recipe", "summary"])
def test_only_the_runs_stats_are_plotted_and_the_others_listed_capped(real_run, tmp_path, djx_cli, with_recipe):
    export = _copy_outputs(real_run, tmp_path, _foreign)
    recipe = ["--recipe", real_run / "r.yaml"] if with_recipe else []
    res = djx_cli("analyze", export, *recipe, "--out", tmp_path / "a")
    assert res.rc == 0, res.err
    # text_length_filter's stat: its histogram and its keep-rate curve, nothing else
    assert _pngs(tmp_path / "a") == ["hist_text_len.png", "keep_rate_0_text_length_filter_text_len.png"]
    assert _csv_stats(tmp_path / "a") == ["text_len"]
    said = res.out + res.err
    assert "4,001 other stat names" in said and "3,951 more" in said
    listed = _listed((tmp_path / "a" / "report.html").read_text())
    assert len(listed) == 50 and listed[0] == ("everywhere", "40")
    assert listed[1:] == [(f"f{n:04d}", "1") for n in range(49)]


@pytest.mark.slow  # 50 histograms: several seconds
def test_a_bare_export_plots_the_most_frequent_stats_capped(real_run, tmp_path, djx_cli):
    export = _copy_outputs(real_run, tmp_path, _foreign)
    (export.parent / "o.summary.json").unlink()  # no recipe, no summary: nothing names the run's ops
    res = djx_cli("analyze", export, "--out", tmp_path / "a")
    assert res.rc == 0, res.err
    pngs = _pngs(tmp_path / "a")
    assert len(pngs) == 50 and "hist_text_len.png" in pngs and "hist_everywhere.png" in pngs
    assert "3,952 more" in res.out + res.err
    assert len(_csv_stats(tmp_path / "a")) == 50


def test_a_frequent_stat_first_seen_late_is_still_plotted(real_run, tmp_path):
    # the first record carries 5 more names than fit; "late" first appears in record 2, then in every one
    from djx.analyze import analyze
    export = _copy_outputs(real_run, tmp_path, lambda i: {f"early{n}": 1.0 for n in range(5)} if i == 0
                           else ({"late": float(i)} if i > 1 else {}))
    (export.parent / "o.summary.json").unlink()
    result = analyze(str(export), str(tmp_path / "a"), log=lambda *a: None, max_plots=3)
    assert _pngs(tmp_path / "a") == ["hist_early0.png", "hist_late.png", "hist_text_len.png"]
    late = next(row for row in result.rows if row["stat"] == "late")
    assert late["count"] == 38 and late["min"] == 2.0  # every value, not those after a sketch was free


@pytest.mark.slow
def test_stat_names_that_make_one_file_name_get_their_own_files(tmp_path, djx_cli):
    names = ["a/b", "a_b", "A_b", "a:b", "x" * 400]
    export = write_jsonl_file(tmp_path / "o.jsonl", [
        {"text": "t", "__dj__stats__": {name: float(k * 10 + i) for k, name in enumerate(names)}} for i in range(5)])
    res = djx_cli("analyze", export, "--out", tmp_path / "a")
    assert res.rc == 0, res.err
    html = (tmp_path / "a" / "report.html").read_text()
    files = dict(re.findall(r'<figure data-stat="([^"]*)"><img class="plot" src="([^"]*)"', html))
    assert sorted(files) == sorted(names)
    assert len({f.lower() for f in files.values()}) == len(names)  # distinct even where case does not count
    contents = {(tmp_path / "a" / f).read_bytes() for f in files.values()}
    assert len(contents) == len(names)  # each its own plot: none overwrote another
    assert all(len(f) < 120 for f in files.values())


def test_stat_names_holding_html_are_shown_as_text(tmp_path, djx_cli):
    name = '<img src=x onerror="alert(1)">'
    export = write_jsonl_file(tmp_path / "o.jsonl", [{"text": "t", "__dj__stats__": {name: float(i)}}
                                                     for i in range(3)])
    res = djx_cli("analyze", export, "--out", tmp_path / "a")
    assert res.rc == 0, res.err
    html = (tmp_path / "a" / "report.html").read_text()
    assert name not in html and "&lt;img src=x onerror=&#34;alert(1)&#34;&gt;" in html


def test_more_distinct_names_than_are_counted_is_said(tmp_path):
    # 12,000 distinct names, 300 a record: counting stops at 10,000 names, and says so
    from djx.analyze import analyze
    export = write_jsonl_file(tmp_path / "o.jsonl", [
        {"text": "t", "__dj__stats__": {"everywhere": 1.0, **{f"n{i * 300 + k}": 1.0 for k in range(300)}}}
        for i in range(40)])
    said = []
    analyze(str(export), str(tmp_path / "a"), log=said.append, max_plots=3)
    assert any("more than 10,000 distinct stat names" in line for line in said)
    assert len(_pngs(tmp_path / "a")) == 3 and "hist_everywhere.png" in _pngs(tmp_path / "a")


def test_stat_names_that_matplotlib_or_utf8_cannot_take_are_still_analyzed(tmp_path, djx_cli):
    # "$x^$" starts matplotlib's math mode and fails to parse; "\ud800" (a lone surrogate in JSON)
    # cannot be written as UTF-8: both are shown escaped, in the plots, stats.csv and the report
    names = ["$x^$", "a$\\frac{$b", "\ud800x"]
    export = write_jsonl_file(tmp_path / "o.jsonl", [{"text": "t", "__dj__stats__": {n: float(i) for n in names}}
                                                     for i in range(3)])
    res = djx_cli("analyze", export, "--out", tmp_path / "a")
    assert res.rc == 0 and "Traceback" not in res.err, res.err
    assert len(_pngs(tmp_path / "a")) == 3 and len(_csv_stats(tmp_path / "a")) == 3
    assert "\\ud800x" in res.out and "\\ud800x" in (tmp_path / "a" / "report.html").read_text()
