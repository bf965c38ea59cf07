"""Stats completeness and accounting: `djx check` passes on a run's output and fails, naming the op,
the stat and the sample position, on any output that lost a stat, holds a non-finite one, or lost
a sample; a run whose op leaves a stat out fails the same way."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from djx import POSITION_KEY, STATS_KEY, CheckError, Pipeline


@pytest.fixture
def good_run(tmp_path, text_dataset, write_recipe):
    """A finished run: (recipe, export path)."""
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path=str(text_dataset.path),
                          export_path="out/kept.jsonl", np=2, start_method="fork", batch_size=4,
                          process=[{"text_length_filter": {"min_len": 3}},
                                   {"text_length_filter": {"min_len": 0, "max_len": 8}}])
    summary = Pipeline.from_recipe(str(recipe)).run(progress=False)
    assert summary["kept"] and summary["dropped"] and summary["rejected"]
    return recipe, tmp_path / "out" / "kept.jsonl"


def edit_line(path: Path, index: int, edit) -> int:
    """Replace line `index` of a JSON Lines file by edit(line) (None deletes it); return the
    position (__dj__pos__) of the sample on that line."""
    lines = path.read_text().splitlines(keepends=True)
    pos = json.loads(lines[index])[POSITION_KEY]
    new = edit(lines[index])
    lines[index:index + 1] = [] if new is None else [new]
    path.write_text("".join(lines))
    return pos


_GONE = object()


def set_stat(key: str, value=_GONE):
    """An edit of one export line: the stat `key` set to `value`, or removed (no value given)."""
    def edit(line: str) -> str:
        sample = json.loads(line)
        if value is _GONE:
            del sample[STATS_KEY][key]
        else:
            sample[STATS_KEY][key] = value
        return json.dumps(sample) + "\n"
    return edit


def without_stat(key: str):
    return set_stat(key)


def test_check_passes_on_a_finished_run(good_run, djx_cli):
    recipe, export = good_run
    res = djx_cli("check", export, "--recipe", recipe)
    assert res.rc == 0, res.out + res.err
    assert "check passed" in res.out


def test_check_fails_when_a_kept_sample_lost_a_stat(good_run, djx_cli):
    recipe, export = good_run
    pos = edit_line(export, 2, without_stat("text_len"))
    res = djx_cli("check", export, "--recipe", recipe)
    assert res.rc == 1
    assert "kept sample missing stat 'text_len' of op text_length_filter" in res.out
    assert f"positions {pos}" in res.out


def test_check_fails_when_a_stat_is_nan(good_run, djx_cli):
    recipe, export = good_run
    line = export.read_text().splitlines()[1]
    value = json.loads(line)[STATS_KEY]["text_len"]
    pos = edit_line(export, 1, lambda l: l.replace(f'"text_len": {value}', '"text_len": NaN'))
    assert "NaN" in export.read_text()
    res = djx_cli("check", export, "--recipe", recipe)
    assert res.rc == 1
    assert "stat 'text_len' of op text_length_filter non-finite" in res.out
    assert f"positions {pos}" in res.out


def test_check_fails_when_a_sample_is_missing(good_run, djx_cli):
    recipe, export = good_run
    pos = edit_line(export, 0, lambda line: None)
    res = djx_cli("check", export, "--recipe", recipe)
    assert res.rc == 1
    assert "count mismatch" in res.out
    assert "input sample missing from every output" in res.out and f"positions {pos}" in res.out


def test_check_fails_when_a_sample_appears_twice(good_run, djx_cli):
    recipe, export = good_run
    dropped = export.with_name("kept.dropped.jsonl")
    pos = edit_line(dropped, 0, lambda line: line + line)
    res = djx_cli("check", export, "--recipe", recipe)
    assert res.rc == 1
    assert "more than once" in res.out and f"positions {pos}" in res.out


def test_check_fails_when_a_dropped_sample_lost_the_stat_of_the_op_that_dropped_it(good_run, djx_cli):
    recipe, export = good_run
    dropped = export.with_name("kept.dropped.jsonl")
    pos = edit_line(dropped, 0, without_stat("text_len"))
    res = djx_cli("check", export, "--recipe", recipe)
    assert res.rc == 1
    assert "dropped sample missing stat 'text_len' of op text_length_filter" in res.out
    assert f"positions {pos}" in res.out


def test_check_counts_samples_even_when_dropped_ones_were_not_exported(tmp_path, text_dataset,
                                                                      write_recipe, djx_cli):
    """With export_dropped: false the summary still holds the dropped count, so a kept sample
    deleted afterwards must still fail the check."""
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path=str(text_dataset.path),
                          export_path="out/kept.jsonl", np=1, export_dropped=False,
                          process=[{"text_length_filter": {"min_len": 3}}])
    Pipeline.from_recipe(str(recipe)).run(progress=False)
    export = tmp_path / "out" / "kept.jsonl"
    assert djx_cli("check", export, "--recipe", recipe).rc == 0
    edit_line(export, 0, lambda line: None)
    res = djx_cli("check", export, "--recipe", recipe)
    assert res.rc == 1, res.out


def test_check_without_a_summary_takes_the_input_count_from_the_command_line(good_run, djx_cli,
                                                                             text_dataset):
    recipe, export = good_run
    export.with_name("kept.summary.json").unlink()
    res = djx_cli("check", export, "--recipe", recipe, "--input-count", text_dataset.records)
    assert res.rc == 0, res.out
    res = djx_cli("check", export, "--recipe", recipe, "--input-count", text_dataset.records + 1)
    assert res.rc == 1 and "count mismatch" in res.out


def test_check_of_a_missing_output_is_an_error(tmp_path, good_run, djx_cli):
    recipe, _ = good_run
    res = djx_cli("check", tmp_path / "nowhere" / "kept.jsonl", "--recipe", recipe)
    assert res.rc == 1 and "no such output" in res.err


def test_a_stat_an_op_writes_as_nan_rejects_that_sample_naming_the_stat(plugin_site, tmp_path, write_jsonl,
                                                                         write_recipe, read_jsonl):
    write_jsonl(tmp_path / "d.jsonl", [{"text": "fine"}, {"text": "BAD one"}, {"text": "fine too"}])
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path="d.jsonl", export_path="out/kept.jsonl",
                          np=2, start_method="fork", custom_ops=["djx_test_plugin_ops"],
                          process=[{"unreliable_stat_filter": {"marker": "BAD", "mode": "nan"}}])
    summary = Pipeline.from_recipe(str(recipe)).run(progress=False, log=lambda *a: None)
    assert summary["check"]["ok"] and (summary["kept"], summary["rejected"]) == (2, 1), summary
    [rejected] = read_jsonl(tmp_path / "out" / "kept.rejected.jsonl")
    assert "unreliable_stat_filter wrote a non-finite stat unreliable_score = nan" in rejected["reason"]
    assert rejected["code"] == "op_error" and rejected["record"]["text"] == "BAD one"


@pytest.mark.parametrize("mode, problem", [("missing", "missing stat")])
def test_a_run_whose_op_leaves_a_bad_stat_fails_naming_the_op_and_sample(
        mode, problem, plugin_site, tmp_path, write_jsonl, write_recipe, djx_cli, read_jsonl):
    write_jsonl(tmp_path / "d.jsonl", [{"text": "fine"}, {"text": "BAD one"}, {"text": "fine too"}])
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path="d.jsonl", export_path="out/kept.jsonl",
                          np=2, start_method="fork", custom_ops=["djx_test_plugin_ops"],
                          process=[{"unreliable_stat_filter": {"marker": "BAD", "mode": mode}}])
    with pytest.raises(CheckError) as e:
        Pipeline.from_recipe(str(recipe)).run(progress=False)
    assert "stat 'unreliable_score' of op unreliable_stat_filter" in str(e.value)
    assert problem in str(e.value) and "positions 1" in str(e.value)
    res = djx_cli("process", recipe, "--quiet")
    assert res.rc == 1 and "unreliable_stat_filter" in res.err
    summary = json.loads((tmp_path / "out" / "kept.summary.json").read_text())
    assert summary["check"]["ok"] is False  # the outputs are written, for inspection
    assert len(read_jsonl(tmp_path / "out" / "kept.jsonl")) == 3


def test_check_fails_on_an_export_made_with_other_thresholds(good_run, djx_cli, write_recipe, tmp_path):
    recipe, export = good_run
    kept_lengths = [json.loads(line)[STATS_KEY]["text_len"] for line in export.read_text().splitlines()]
    assert max(kept_lengths) > 5, "the fixture must keep texts longer than the stricter threshold"
    stricter = write_recipe(tmp_path / "stricter.yaml", dataset_path="unused.jsonl", export_path="out/kept.jsonl",
                            process=[{"text_length_filter": {"min_len": 3}},
                                     {"text_length_filter": {"min_len": 0, "max_len": 5}}])
    res = djx_cli("check", export, "--recipe", stricter)
    assert res.rc == 1
    assert "kept sample fails op 1 (text_length_filter) on its recorded stats" in res.out
    # the samples named are exactly those the stricter threshold would drop
    assert f"{sum(n > 5 for n in kept_lengths)} sample(s)" in res.out


def test_check_fails_when_a_kept_stat_was_edited_below_the_minimum(good_run, djx_cli):
    recipe, export = good_run
    pos = edit_line(export, 0, set_stat("text_len", 1))
    res = djx_cli("check", export, "--recipe", recipe)
    assert res.rc == 1
    assert "kept sample fails op 0 (text_length_filter)" in res.out
    assert f"positions {pos}" in res.out


def test_check_fails_when_a_dropped_sample_passes_the_op_its_drop_names(good_run, djx_cli):
    recipe, export = good_run
    dropped = export.with_name("kept.dropped.jsonl")
    lines = dropped.read_text().splitlines()
    index = next(i for i, line in enumerate(lines) if json.loads(line)["__dj__drop__"]["op_index"] == 1)
    pos = edit_line(dropped, index, set_stat("text_len", 4))
    res = djx_cli("check", export, "--recipe", recipe)
    assert res.rc == 1
    assert "dropped sample passes op 1 (text_length_filter) that its drop names" in res.out
    assert f"positions {pos}" in res.out


def test_check_without_recipe_uses_the_effective_recipe_the_summary_recorded(tmp_path, text_dataset, write_recipe,
                                                                            djx_cli):
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path=str(text_dataset.path), export_path="out/kept.jsonl",
                          np=1, start_method="fork", process=[{"text_length_filter": {"min_len": 3}}])
    run = djx_cli("process", recipe, "--quiet", "--set", "process.0.text_length_filter.min_len=6")
    assert run.rc == 0, run.err
    export = tmp_path / "out" / "kept.jsonl"
    res = djx_cli("check", export)
    assert res.rc == 0 and "check passed" in res.out, res.out + res.err
    # the file alone (min_len 3) is not what ran: every sample of length 3..5 it dropped now "passes"
    assert djx_cli("check", export, "--recipe", recipe).rc == 1
    edit_line(export, 0, set_stat("text_len", 4))  # below the recorded min_len 6
    res = djx_cli("check", export)
    assert res.rc == 1 and "text_len" in res.out


def test_check_without_recipe_or_summary_says_what_to_give(good_run, djx_cli, text_dataset):
    _, export = good_run
    export.with_name("kept.summary.json").unlink()
    res = djx_cli("check", export, "--input-count", text_dataset.records)
    assert res.rc == 1 and "give the run's recipe with --recipe" in res.err and "Traceback" not in res.err


def test_check_never_imports_the_plugins_a_summary_names(tmp_path, text_dataset, write_recipe, djx_cli):
    plugin = tmp_path / "canary_ops.py"
    plugin.write_text("import pathlib\npathlib.Path(__file__).with_name('IMPORTED').write_text('x')\n"
                      "from djx import Filter, register_op\n\n"
                      "@register_op('canary_len_filter')\nclass Canary(Filter):\n    \"\"\"Keep every sample (a canary).\"\"\"\n"
                      "    stats_keys = ('n',)\n"
                      "    def compute_sample(self, sample, batch):\n        batch.stats(sample)['n'] = 1\n"
                      "    def keep(self, stats):\n        return True\n")
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path=str(text_dataset.path), export_path="out/kept.jsonl",
                          np=1, start_method="fork", custom_ops=[str(plugin)], process=[{"canary_len_filter": {}}])
    assert djx_cli("process", recipe, "--quiet").rc == 0
    (tmp_path / "IMPORTED").unlink()
    res = djx_cli("check", tmp_path / "out" / "kept.jsonl")
    assert res.rc == 1 and "which a summary never loads: name them with --custom-ops" in res.err
    assert not (tmp_path / "IMPORTED").exists()


@pytest.mark.parametrize("claimed", [10**9, 10**12])
def test_a_huge_claimed_input_count_is_a_mismatch_at_once_not_memory(good_run, djx_cli, text_dataset, claimed):
    """An edited summary (or --input-count) may claim any count: check's memory follows the records
    the outputs hold, and the missing positions are counted, the first few named."""
    recipe, export = good_run
    summary = export.with_name("kept.summary.json")
    data = json.loads(summary.read_text())
    data["input"] = claimed
    summary.write_text(json.dumps(data))
    res = djx_cli("check", export, "--recipe", recipe)
    assert res.rc == 1 and "Traceback" not in res.out + res.err, res.out + res.err
    missing = claimed - text_dataset.records
    assert f"input sample missing from every output: {missing} sample(s), positions {text_dataset.records}, " \
           f"{text_dataset.records + 1}," in res.out, res.out
    assert f"count mismatch: input {claimed}" in res.out


def test_a_stat_too_large_for_a_float_is_a_number_not_a_traceback(good_run, djx_cli):
    recipe, export = good_run
    def huge(line):
        rec = json.loads(line)
        rec[STATS_KEY]["text_len"] = 10**400
        return json.dumps(rec) + "\n"
    edit_line(export, 0, huge)
    res = djx_cli("check", export, "--recipe", recipe)
    assert "Traceback" not in res.out + res.err and res.rc == 1, res.out + res.err
    assert "kept sample fails op 1 (text_length_filter) on its recorded stats" in res.out


def test_check_notes_stats_this_users_key_does_not_vouch_for(good_run, djx_cli):
    """An export whose text and stat were edited together passes the verdicts (the edit agrees with
    them) but not the signature: check says how many samples and which, as a note."""
    recipe, export = good_run
    clean = djx_cli("check", export, "--recipe", recipe)
    assert clean.rc == 0 and "vouch" not in clean.out, clean.out

    def edited(line):
        rec = json.loads(line)
        rec["text"], rec[STATS_KEY]["text_len"] = "abcd", 4
        return json.dumps(rec) + "\n"
    edit_line(export, 0, edited)
    pos = json.loads(export.read_text().splitlines()[0])["__dj__pos__"]
    res = djx_cli("check", export, "--recipe", recipe)
    assert res.rc == 0, res.out
    assert "note: 1 of " in res.out and f"does not vouch for (positions {pos})" in res.out, res.out
