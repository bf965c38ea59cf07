"""Hostile input: every record ends exactly once in kept, dropped or rejected (with a reason), and
input that cannot be processed at all is a clear error (a message, exit 1, no traceback) before
any work. The hostile corpus is written here, at test time."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from djx import POSITION_KEY, Pipeline
from djx.core.errors import RecipeError
from djx.core.recipe.recipe import recipe_from_dict

from conftest import LONG, read_jsonl_file


HOSTILE_OPS = '''
import numpy as np
from djx import Filter, Mapper, register_op


@register_op("hostile_replacing_mapper")
class ReplacingMapper(Mapper):
    """Replaces each sample with a new dict (no position, no stats): upper-cased text."""

    def process(self, batch):
        for i, s in enumerate(batch.samples):
            batch.samples[i] = {"text": s["text"].upper(), "images": s.get("images", []), "mapped": True}


@register_op("hostile_verdict_filter")
class VerdictFilter(Filter):
    """keep() returns what the sample's `verdict` field names."""

    stats_keys = ("verdict",)
    VERDICTS = {"true": True, "false": False, "np_true": np.bool_(True), "np_false": np.bool_(False),
                "pair_drop": (False, "too odd"), "pair_keep": (True, "fine"), "string_false": "False",
                "none": None, "one_tuple": (True,), "array": np.array([True, False]), "int": 1}

    def compute_stats(self, batch):
        for s in batch.samples:
            batch.stats(s)["verdict"] = s["verdict"]

    def keep(self, stats):
        return self.VERDICTS[stats["verdict"]]


@register_op("hostile_unwritable_mapper")
class UnwritableMapper(Mapper):
    """Puts what cannot be written as UTF-8 JSON into the samples whose `spoil` field names it."""

    def process(self, batch):
        for s in batch.samples:
            if s.get("spoil") == "surrogate":
                s["text"] += "\\ud800"
            elif s.get("spoil") == "cycle":
                s["self"] = s
            elif s.get("spoil") == "stat_surrogate":
                batch.stats(s)["note"] = "\\udfff"


@register_op("hostile_init_filter")
class InitFilter(Filter):
    """Checks its own parameter in __init__ the way plug-ins do: raises, or exits, when told to."""

    stats_keys = ("one",)

    def __init__(self, fail: str = "", **common):
        super().__init__(**common)
        if fail == "raise":
            raise ValueError("fail must be empty")
        if fail == "exit":
            import sys
            sys.exit(3)

    def compute_stats(self, batch):
        for s in batch.samples:
            batch.stats(s)["one"] = 1

    def keep(self, stats):
        return True


@register_op("hostile_bookkeeping_mapper")
class BookkeepingMapper(Mapper):
    """Deletes or rewrites djx's own keys (position, stats) in the samples whose `spoil` says so."""

    def process(self, batch):
        for s in batch.samples:
            if s.get("spoil") == "delete_keys":
                s.pop("__dj__pos__", None)
                s.pop("__dj__stats__", None)
            elif s.get("spoil") == "move_position":
                s["__dj__pos__"] = 0


@register_op("text_length_filter")
class Impostor(Filter):
    """A plug-in that takes a built-in op's name."""
'''


@pytest.fixture(scope="session")
def hostile_ops(tmp_path_factory) -> Path:
    """The misbehaving plug-in ops (one file per session: a plug-in file is imported once)."""
    path = tmp_path_factory.mktemp("hostile") / "hostile_ops.py"
    path.write_text(HOSTILE_OPS.split('\n\n@register_op("text_length_filter")')[0] + "\n")
    return path


def outputs(export: Path) -> dict[str, dict[int, dict]]:
    """{kind: {position: record}} of a finished run's three files."""
    stem = str(export)[:-len(".jsonl")]
    files = {"kept": export, "dropped": Path(stem + ".dropped.jsonl"), "rejected": Path(stem + ".rejected.jsonl")}
    return {kind: {r[POSITION_KEY]: r for r in read_jsonl_file(f)} for kind, f in files.items()}


def assert_each_once(out: dict, n: int) -> None:
    positions = [p for kind in out.values() for p in kind]
    assert sorted(positions) == list(range(n))
    assert all(r["reason"] for r in out["rejected"].values())


def run(tmp_path, dataset, process, **keys) -> tuple[dict, dict]:
    """Run in this process (local executor, fork); (summary, outputs)."""
    export = tmp_path / "out" / "o.jsonl"
    recipe = recipe_from_dict({"dataset_path": str(dataset), "export_path": str(export), "process": process,
                               "start_method": "fork", **keys}, base_dir=str(tmp_path))
    summary = Pipeline(recipe=recipe).run(progress=False, log=lambda *a: None)
    assert summary["check"]["ok"], summary["check"]
    return summary, outputs(export)


def assert_clear_error(res, *phrases) -> None:
    assert res.rc == 1, (res.out, res.err)
    assert res.err.startswith("djx: error: ") and "Traceback" not in res.err + res.out, res.err
    for phrase in phrases:
        assert phrase in res.err, res.err


# -- 1. a .json file is read whole, or refused -----------------------------------------------------

def test_a_json_file_of_concatenated_arrays_is_read_whole(tmp_path):
    data = tmp_path / "data.json"
    data.write_text('[{"text": "one one"}, {"text": "two two"}]\n[{"text": "three"}, {"text": "four four"}]\n')
    summary, out = run(tmp_path, data, [{"text_length_filter": {"min_len": 1}}])
    assert summary["input"] == 4 and [r["text"] for r in out["kept"].values()] == \
        ["one one", "two two", "three", "four four"]


@pytest.mark.parametrize("name, body", [("data.json", '[{"text": "one one"}, {"text": "two two"}]\n'),
                                        ("data.jsonl", '{"text": "one one"}\n{"text": "two two"}\n')])
def test_a_byte_order_mark_at_the_start_of_a_file_is_read_past(tmp_path, name, body):
    """Windows tools write UTF-8 with a BOM; the records are the same as without it."""
    data = tmp_path / name
    data.write_bytes(b"\xef\xbb\xbf" + body.encode())
    summary, out = run(tmp_path, data, [{"text_length_filter": {"min_len": 1}}])
    assert summary["input"] == 2 and [r["text"] for r in out["kept"].values()] == ["one one", "two two"]


@pytest.mark.parametrize("tail, seen_at_once", [("trailing text", True), ("{}", True), ("]", False)])
def test_a_json_file_with_other_data_after_its_array_is_refused(tmp_path, write_recipe, djx_cli, tail, seen_at_once):
    data = tmp_path / "data.json"
    data.write_text(f'[{{"text": "one one"}}, {{"text": "two two"}}] {tail}\n')
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path=str(data), export_path="out/o.jsonl",
                          process=[{"text_length_filter": {"min_len": 1}}])
    assert_clear_error(djx_cli("process", recipe, "--quiet"), str(data), "after the closing ]")
    assert not (tmp_path / "out" / "o.jsonl").exists()
    assert (tmp_path / "out").exists() != seen_at_once  # a file that does not end in ]: before any work


# -- 2, 16. outputs that would destroy an input or cannot be written -------------------------------

@pytest.mark.parametrize("input_name, which", [("o.jsonl", "export"), ("o.dropped.jsonl", "dropped"),
                                               ("o.rejected.jsonl", "rejected"), ("o.summary.json", "summary")])
def test_an_output_that_is_an_input_file_is_refused_before_any_work(tmp_path, write_recipe, djx_cli, input_name,
                                                                     which):
    data = tmp_path / input_name
    data.write_text('[{"text": "precious"}]\n' if input_name.endswith(".json") else '{"text": "precious"}\n')
    before = data.read_bytes()
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path=str(data), export_path="o.jsonl",
                          process=[{"text_length_filter": {"min_len": 100}}])
    assert_clear_error(djx_cli("process", recipe, "--quiet"), str(data), "input")
    assert data.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([input_name, "r.yaml"])  # no state folder


def test_an_export_path_linked_to_the_input_is_refused(tmp_path, write_recipe, djx_cli):
    data = tmp_path / "data.jsonl"
    data.write_text('{"text": "precious"}\n')
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "o.jsonl").symlink_to(data)
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path=str(data), export_path="out/o.jsonl",
                          process=[{"text_length_filter": {"min_len": 100}}])
    assert_clear_error(djx_cli("process", recipe, "--quiet"), "input")
    assert data.read_text() == '{"text": "precious"}\n'


def test_a_glob_dataset_that_would_read_the_runs_own_summary_is_refused(tmp_path, write_recipe, djx_cli):
    (tmp_path / "ds").mkdir()
    (tmp_path / "ds" / "a.json").write_text('[{"text": "hello"}]')
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path=str(tmp_path / "ds" / "*.json"),
                          export_path="ds/o.jsonl", process=[{"text_length_filter": {"min_len": 1}}])
    assert_clear_error(djx_cli("process", recipe, "--quiet"), "o.summary.json")


def test_an_export_path_that_is_a_folder_is_refused_before_any_work(tmp_path, write_recipe, djx_cli):
    data = tmp_path / "data.jsonl"
    data.write_text('{"text": "hello"}\n')
    (tmp_path / "out" / "o.jsonl").mkdir(parents=True)
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path=str(data), export_path="out/o.jsonl",
                          process=[{"text_length_filter": {"min_len": 1}}])
    assert_clear_error(djx_cli("process", recipe, "--quiet"), "o.jsonl", "folder")
    assert not (tmp_path / "out" / ".o.djx-state").exists()


# -- 4, 15. records that cannot be read or written back reject only themselves ---------------------

DEEP = '{"text": "deep deep", "x": ' + "[" * 5000 + "]" * 5000 + "}"
NESTED_300 = '{"text": "nested", "x": ' + "[" * 300 + "]" * 300 + "}"


def hostile_lines() -> tuple[list[bytes], dict[int, str]]:
    """JSON lines with hostile records between good ones; {position: what its reason must say}."""
    good = json.dumps({"text": LONG}).encode()
    bad = {1: b'{"text": "caf\xe9 latin-1"}', 3: b'{"text": "lone \\ud800 surrogate"}',
           5: DEEP.encode(), 7: NESTED_300.encode(), 9: b'{"text": "ok", "k\\udfff": 1}'}
    lines = [bad.get(i, good) for i in range(11)]
    return lines, {1: "UTF-8", 3: "surrogate", 5: "nested", 7: "nested", 9: "surrogate"}


def check_hostile_outputs(out: dict, lines: list[bytes], expect: dict[int, str]) -> None:
    assert_each_once(out, len(lines))
    assert sorted(out["rejected"]) == sorted(expect)
    for pos, phrase in expect.items():
        rej = out["rejected"][pos]
        assert phrase in rej["reason"] and rej["code"] == "bad_input" and rej["line"] == pos + 1, rej
    # the byte offset of the bad byte in the file: line 2 starts after line 1 and its newline
    assert f"byte {len(lines[0]) + 1 + 13}" in out["rejected"][1]["reason"]
    assert "\\xe9" in out["rejected"][1]["raw"]  # shown, not replaced by U+FFFD
    assert out["rejected"][3]["raw"] == lines[3].decode()
    assert "\ufffd" not in json.dumps(out, ensure_ascii=False)


def test_bad_utf8_surrogates_and_deep_nesting_reject_only_their_line(tmp_path):
    lines, expect = hostile_lines()
    data = tmp_path / "data.jsonl"
    data.write_bytes(b"\n".join(lines) + b"\n")
    _, out = run(tmp_path, data, [{"text_length_filter": {"min_len": 1}}], np=2, batch_size=3)
    check_hostile_outputs(out, lines, expect)


def test_bad_utf8_surrogates_and_deep_nesting_reject_only_their_line_on_ray(ray_address, tmp_path):
    lines, expect = hostile_lines()
    data = tmp_path / "data.jsonl"
    data.write_bytes(b"\n".join(lines) + b"\n")
    _, out = run(tmp_path, data, [{"text_length_filter": {"min_len": 1}}], executor="ray", np=1,
                 batch_size=3, ray_address=ray_address)
    check_hostile_outputs(out, lines, expect)


def test_surrogates_and_deep_nesting_in_a_json_array_reject_only_their_record(tmp_path):
    data = tmp_path / "data.json"
    data.write_text("[" + ", ".join([json.dumps({"text": LONG}), '{"text": "lone \\udc00"}', DEEP,
                                     json.dumps({"text": LONG})]) + "]")
    _, out = run(tmp_path, data, [{"text_length_filter": {"min_len": 1}}])
    assert_each_once(out, 4)
    assert sorted(out["kept"]) == [0, 3]
    assert "surrogate" in out["rejected"][1]["reason"] and "nested" in out["rejected"][2]["reason"]


@pytest.mark.slow
def test_a_70_mb_record_in_a_json_array_is_read(tmp_path):
    data = tmp_path / "data.json"
    big = "x" * (70 << 20)
    data.write_text('[{"text": "small"}, {"text": "' + big + '"}, {"text": "after"}]')
    summary, out = run(tmp_path, data, [{"text_length_filter": {"min_len": 1}}])
    assert summary["input"] == 3 and [len(r["text"]) for r in out["kept"].values()] == [5, 70 << 20, 5]


# -- 6, 7. what an op returns takes effect, or rejects its sample -----------------------------------

def test_a_mapper_that_replaces_samples_takes_effect(tmp_path, hostile_ops):
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps({"text": f"text {i}", "id": i}) + "\n" for i in range(5)))
    _, out = run(tmp_path, data, [{"text_length_filter": {"min_len": 1}}, {"hostile_replacing_mapper": {}}],
                 custom_ops=[str(hostile_ops)], batch_size=2)
    assert_each_once(out, 5)
    kept = list(out["kept"].values())
    assert [r["text"] for r in kept] == [f"TEXT {i}" for i in range(5)] and all(r["mapped"] for r in kept)
    assert all("text_len" in r["__dj__stats__"] for r in kept)  # earlier filters' stats stay


def test_keep_answers_bool_numpy_bool_or_a_pair_and_anything_else_rejects_the_sample(tmp_path, hostile_ops):
    verdicts = ["true", "false", "np_true", "np_false", "pair_drop", "pair_keep",
                "string_false", "none", "one_tuple", "array", "int"]
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps({"text": "some text", "verdict": v}) + "\n" for v in verdicts))
    _, out = run(tmp_path, data, [{"hostile_verdict_filter": {}}], custom_ops=[str(hostile_ops)])
    assert_each_once(out, len(verdicts))
    by = {kind: sorted(verdicts[p] for p in recs) for kind, recs in out.items()}
    assert by["kept"] == sorted(["true", "np_true", "pair_keep"])
    assert by["dropped"] == sorted(["false", "np_false", "pair_drop"])
    assert out["dropped"][verdicts.index("pair_drop")]["__dj__drop__"]["reason"] == "too odd"
    assert by["rejected"] == sorted(["string_false", "none", "one_tuple", "array", "int"])
    for pos, rej in out["rejected"].items():
        assert rej["code"] == "op_error" and rej["op"] == "hostile_verdict_filter"
        assert "hostile_verdict_filter.keep returned" in rej["reason"]
    assert "'False'" in out["rejected"][verdicts.index("string_false")]["reason"]


# -- 11. only regular files are opened as images ----------------------------------------------------

def test_a_fifo_or_device_as_an_image_is_rejected_not_waited_on(tmp_path, make_image, write_recipe):
    make_image("ok.png", (32, 32))
    os.mkfifo(tmp_path / "images" / "fifo.png")
    records = [{"text": LONG, "images": ["images/ok.png"]}, {"text": LONG, "images": ["images/fifo.png"]},
               {"text": LONG, "images": ["/dev/zero"]}, {"text": LONG, "images": ["images"]}]
    (tmp_path / "data.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path="data.jsonl", export_path="out/o.jsonl",
                          start_method="fork", process=[{"image_shape_filter": {"min_width": 8}}])
    # a subprocess, so that a regression fails this test instead of hanging the suite
    proc = subprocess.run([sys.executable, "-m", "djx.cli", "process", str(recipe), "--quiet"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    out = outputs(tmp_path / "out" / "o.jsonl")
    assert sorted(out["kept"]) == [0] and sorted(out["rejected"]) == [1, 2, 3]
    for pos in (1, 2, 3):
        assert "not a regular file" in out["rejected"][pos]["reason"]
        assert out["rejected"][pos]["code"] == "bad_image"


# -- 14, 16, 17. clear errors where a traceback was -------------------------------------------------

@pytest.mark.parametrize("key, value, phrase", [
    ("max_in_flight", -2, "max_in_flight: must be >= 1"), ("checkpoint_every", 0, "checkpoint_every: must be >= 1"),
    ("image_special_token", "", "image_special_token"), ("image_special_token", "   ", "image_special_token"),
    ("eoc_special_token", "", "eoc_special_token"),
    ("eoc_special_token", "<__dj__image>", "eoc_special_token"),
])
def test_bad_numeric_keys_and_special_tokens_are_clear_errors(tmp_path, write_recipe, djx_cli, key, value, phrase):
    (tmp_path / "data.jsonl").write_text('{"text": "hello"}\n')
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path="data.jsonl", export_path="out/o.jsonl",
                          process=[{"text_length_filter": {}}], **{key: value})
    assert_clear_error(djx_cli("process", recipe, "--quiet"), phrase)
    with pytest.raises(RecipeError, match=phrase.split(":")[0]):
        recipe_from_dict({"dataset_path": "d.jsonl", "export_path": "o.jsonl", key: value})


def test_a_corrupt_parquet_file_is_a_clear_error(tmp_path, write_recipe, djx_cli):
    data = tmp_path / "data.parquet"
    data.write_bytes(b"PAR1" + b"\x00garbage" * 100 + b"PAR1")
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path=str(data), export_path="out/o.jsonl",
                          process=[{"text_length_filter": {}}])
    assert_clear_error(djx_cli("process", recipe, "--quiet"), str(data), "parquet")


def test_djx_check_on_an_export_cut_mid_line_is_a_clear_failure(tmp_path, write_recipe, djx_cli):
    (tmp_path / "data.jsonl").write_text("".join(json.dumps({"text": f"text {i}"}) + "\n" for i in range(5)))
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path="data.jsonl", export_path="out/o.jsonl",
                          process=[{"text_length_filter": {"min_len": 1}}])
    assert djx_cli("process", recipe, "--quiet").rc == 0
    export = tmp_path / "out" / "o.jsonl"
    export.write_bytes(export.read_bytes()[:-10])
    assert_clear_error(djx_cli("check", export, "--recipe", recipe), str(export), "line 5")
    (tmp_path / "out" / "o.summary.json").write_text('{"input": 5, "kept"')
    assert_clear_error(djx_cli("check", export, "--recipe", recipe), "o.summary.json")


def test_a_recipe_path_that_is_a_folder_or_not_utf8_is_a_clear_error(tmp_path, djx_cli):
    assert_clear_error(djx_cli("process", tmp_path, "--quiet"), "folder")
    (tmp_path / "r.yaml").write_bytes(b"dataset_path: caf\xe9.jsonl\n")
    assert_clear_error(djx_cli("process", tmp_path / "r.yaml", "--quiet"), "UTF-8")


def test_a_set_value_that_is_not_yaml_is_a_clear_error(tmp_path, write_recipe, djx_cli):
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path="data.jsonl", export_path="out/o.jsonl")
    assert_clear_error(djx_cli("process", recipe, "--set", "np=[1"), "--set np=[1")


def test_a_plugin_that_takes_a_builtin_name_is_told_to_rename_itself(tmp_path, write_recipe, djx_cli):
    plugin = tmp_path / "impostor.py"
    plugin.write_text("from djx import Filter, register_op\n" + HOSTILE_OPS.split("\n\n\n")[-1])
    (tmp_path / "data.jsonl").write_text('{"text": "hello"}\n')
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path="data.jsonl", export_path="out/o.jsonl",
                          custom_ops=[str(plugin)], process=[{"text_length_filter": {}}])
    res = djx_cli("process", recipe, "--quiet")
    assert_clear_error(res, "built-in", str(plugin))
    assert "choose another name for djx.ops" not in res.err  # never: rename the built-in


# -- an op that leaves a sample unwritable rejects that sample only -----------------------------------

SPOILED = {2: "surrogate", 5: "cycle", 9: "stat_surrogate"}


def spoiled_dataset(tmp_path) -> Path:
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps({"id": i, "text": f"sample {i}", "spoil": SPOILED.get(i)}) + "\n"
                            for i in range(12)))
    return data


def check_spoiled(summary: dict, out: dict) -> None:
    assert_each_once(out, 12)
    assert sorted(out["rejected"]) == sorted(SPOILED)
    for pos, rec in out["rejected"].items():
        assert rec["code"] == "op_error" and rec["record"]["id"] == pos
    assert "lone surrogate" in out["rejected"][2]["reason"] and "lone surrogate" in out["rejected"][9]["reason"]
    assert "cannot be written as JSON" in out["rejected"][5]["reason"]
    assert summary["ops"][-1]["rejected"] == 3 and summary["kept"] == 9


def test_an_op_that_leaves_a_sample_unwritable_rejects_only_that_sample(tmp_path, hostile_ops):
    process = [{"hostile_unwritable_mapper": {}}, {"text_length_filter": {"min_len": 1}}]
    summary, out = run(tmp_path, spoiled_dataset(tmp_path), process, np=2, batch_size=4,
                       custom_ops=[str(hostile_ops)])
    check_spoiled(summary, out)


def test_an_op_that_leaves_a_sample_unwritable_rejects_only_that_sample_on_ray(ray_address, tmp_path,
                                                                             hostile_ops):
    process = [{"hostile_unwritable_mapper": {}}, {"text_length_filter": {"min_len": 1}}]
    summary, out = run(tmp_path, spoiled_dataset(tmp_path), process, np=1, batch_size=4, executor="ray",
                       ray_address=ray_address, custom_ops=[str(hostile_ops)])
    check_spoiled(summary, out)


def test_an_op_that_deletes_or_rewrites_djx_keys_loses_no_sample(tmp_path, hostile_ops):
    data = tmp_path / "data.jsonl"
    spoil = {1: "delete_keys", 4: "move_position", 7: "delete_keys"}
    data.write_text("".join(json.dumps({"id": i, "text": f"sample {i}", "spoil": spoil.get(i)}) + "\n"
                            for i in range(10)))
    process = [{"text_length_filter": {"min_len": 1}}, {"hostile_bookkeeping_mapper": {}},
               {"text_length_filter": {"min_len": 2}}]
    summary, out = run(tmp_path, data, process, np=2, batch_size=3, custom_ops=[str(hostile_ops)])
    assert_each_once(out, 10)
    assert {pos: s["id"] for pos, s in out["kept"].items()} == {i: i for i in range(10)}
    assert all("text_len" in s["__dj__stats__"] for s in out["kept"].values())


# -- inputs that are not what a dataset is, and outputs that cannot be written: said before work ---

def _cli_recipe(tmp_path, write_recipe, dataset: str, export: str = "out/o.jsonl") -> Path:
    return write_recipe(tmp_path / "r.yaml", dataset_path=dataset, export_path=export,
                        process=[{"text_length_filter": {"min_len": 1}}])


def test_a_fifo_as_the_dataset_is_refused_not_waited_on(tmp_path, djx_cli, write_recipe):
    os.mkfifo(tmp_path / "data.jsonl")
    res = djx_cli("process", _cli_recipe(tmp_path, write_recipe, "data.jsonl"), "--quiet")
    assert_clear_error(res, "is not a regular file")


def test_a_compressed_dataset_is_refused_with_what_to_do(tmp_path, djx_cli, write_recipe):
    import gzip
    with gzip.open(tmp_path / "data.jsonl.gz", "wt") as f:
        f.write('{"text": "hello"}\n' * 50)
    res = djx_cli("process", _cli_recipe(tmp_path, write_recipe, "data.jsonl.gz"), "--quiet")
    assert_clear_error(res, "a compressed file", "decompress it first")


def test_a_file_that_is_not_json_lines_stops_the_run_instead_of_rejecting_everything(tmp_path, djx_cli,
                                                                                   write_recipe):
    (tmp_path / "data.jsonl").write_text("id,text\n" + "".join(f"{i},sample {i}\n" for i in range(100)))
    res = djx_cli("process", _cli_recipe(tmp_path, write_recipe, "data.jsonl"), "--quiet")
    assert_clear_error(res, "of the first", "are not valid JSON", "Is the dataset JSON Lines")
    assert not (tmp_path / "out" / "o.jsonl").exists() and not (tmp_path / "out" / ".o.djx-state").exists()


def test_a_few_broken_lines_do_not_stop_the_run(tmp_path, djx_cli, write_recipe):
    lines = [json.dumps({"text": f"sample {i}"}) if i % 5 else "{broken" for i in range(100)]
    (tmp_path / "data.jsonl").write_text("\n".join(lines) + "\n")
    res = djx_cli("process", _cli_recipe(tmp_path, write_recipe, "data.jsonl"), "--quiet")
    assert res.rc == 0, res.err
    summary = json.loads((tmp_path / "out" / "o.summary.json").read_text())
    assert (summary["kept"], summary["rejected"]) == (80, 20)


def test_an_export_folder_that_cannot_be_made_is_refused_before_work(tmp_path, djx_cli, write_recipe):
    (tmp_path / "data.jsonl").write_text('{"text": "hello"}\n')
    # /proc refuses new folders even to root, for whom permission bits mean nothing
    res = djx_cli("process", _cli_recipe(tmp_path, write_recipe, "data.jsonl", "/proc/djx-out/o.jsonl"), "--quiet")
    assert_clear_error(res, "export_path: cannot write under /proc/djx-out")


@pytest.mark.parametrize("fail,said", [("raise", "ValueError: fail must be empty"), ("exit", "SystemExit: 3")])
def test_a_plugin_that_refuses_its_parameters_in_init_is_a_recipe_error(tmp_path, djx_cli, write_recipe,
                                                                        hostile_ops, fail, said):
    (tmp_path / "data.jsonl").write_text('{"text": "hello"}\n')
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path="data.jsonl", export_path="out/o.jsonl",
                          custom_ops=[str(hostile_ops)], process=[{"hostile_init_filter": {"fail": fail}}])
    assert_clear_error(djx_cli("process", recipe, "--quiet"),
                       f"process[0].hostile_init_filter: the op could not be made: {said}")


def test_a_single_image_path_string_is_read_as_one_image(tmp_path, make_image, write_recipe, djx_cli, read_jsonl):
    make_image("wide.png", (64, 16))
    make_image("tall.png", (16, 64))
    records = [{"text": LONG, "images": "images/wide.png"}, {"text": LONG, "images": ["images/tall.png"]},
               {"text": LONG, "images": "images/tall.png"}, {"text": LONG, "images": [3]}]
    (tmp_path / "data.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path="data.jsonl", export_path="out/o.jsonl",
                          start_method="fork", np=1, process=[{"image_shape_filter": {"min_width": 32}}])
    res = djx_cli("process", recipe, "--quiet")
    assert res.rc == 0, res.err
    out = outputs(tmp_path / "out" / "o.jsonl")
    assert sorted(out["kept"]) == [0] and sorted(out["dropped"]) == [1, 2] and sorted(out["rejected"]) == [3]
    kept_images = out["kept"][0]["images"]  # exported as the one-image list it was read as
    assert isinstance(kept_images, list) and len(kept_images) == 1 and kept_images[0].endswith("images/wide.png")
    assert out["kept"][0]["__dj__stats__"]["image_width"] == [64]
    assert out["dropped"][2]["__dj__stats__"]["image_width"] == [16]
    assert "must be an image path or a list of them" in out["rejected"][3]["reason"]
