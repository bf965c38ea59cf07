"""Every export is an input by the name the run's table prints: each format, sharded or not, with
its stats in the records or in the stats file beside it (`keep_stats_in_res_ds: false`, whose
export holds the input's keys only), and the dropped and rejected files. A re-filter of an export
whose stats are beside it reuses them and loads no model; a stats file that is not the export's is
not used, with a warning saying why. Through the `djx` command."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from djx.core.io.output_reader import iter_output

pytestmark = pytest.mark.slow  # each runs the CLI two or three times

STATS = "__dj__stats__"
ASSETS = Path(__file__).parent / "assets"
DEMO = ASSETS / "demo"
CLIP = str(ASSETS / "models" / "tiny-clip")


def _run(djx_cli, recipe) -> tuple[dict, str]:
    """(the summary, the printed table) of a run of `recipe`, which exports to out/o.<suffix>."""
    res = djx_cli("process", recipe, "--quiet")
    assert res.rc == 0, res.out + res.err
    export = _printed(res.out)
    summary = json.loads(Path(export).with_name(Path(export).name.split(".")[0] + ".summary.json").read_text())
    return summary, res.out


def _printed(table: str, what: str = "export") -> str:
    """The file name the table prints for an output (its outputs are the table's last lines)."""
    return re.findall(rf"^  {what}: (\S+)", table, re.M)[-1]


def _samples(path) -> list[dict]:
    return [r for _, r in iter_output(str(path))]


def _raw(path) -> list[dict]:
    """The records of one output file as they are written (nothing merged back)."""
    path = str(path)
    if path.endswith(".parquet"):
        import pyarrow.parquet as pq
        return pq.read_table(path).to_pylist()
    text = Path(path).read_text()
    return json.loads(text) if path.endswith(".json") else [json.loads(line) for line in text.splitlines()]


def _first(tmp_path, mm_records, mm_process, write_jsonl, write_recipe, djx_cli, export, **keys):
    data = write_jsonl(tmp_path / "data.jsonl", [{k: v for k, v in r.items() if k != "expect"} for r in mm_records])
    recipe = write_recipe(tmp_path / "one" / "r.yaml", dataset_path=str(data), export_path=export, np=1,
                          image_root=str(tmp_path), process=mm_process, **keys)
    return _run(djx_cli, recipe)


@pytest.mark.parametrize("suffix", [".jsonl", ".json", ".parquet"])
@pytest.mark.parametrize("keep_stats", [True, False])
def test_every_export_format_is_the_next_runs_input_by_its_printed_name(
        tmp_path, suffix, keep_stats, mm_records, mm_process, write_jsonl, write_recipe, djx_cli):
    first, table = _first(tmp_path, mm_records, mm_process, write_jsonl, write_recipe, djx_cli,
                          "out/o" + suffix, keep_stats_in_res_ds=keep_stats)
    outputs = {kind: _printed(table, kind) for kind in ("export", "dropped", "rejected")}
    for kind, name in outputs.items():
        exported = _samples(name)
        assert len(exported) == first[{"export": "kept"}.get(kind, kind)] > 0
        if kind == "export" and not keep_stats:  # training-ready: the input's keys only
            assert all(set(r) == {"id", "text", "images"} for r in _raw(name)), _raw(name)[0]
        recipe = write_recipe(tmp_path / kind / "r.yaml", dataset_path=name, export_path="out/o" + suffix, np=1,
                              process=[{"text_length_filter": {"min_len": 1}},
                                       {"image_shape_filter": {"min_width": 1, "min_height": 1}}]
                              if kind != "export" else mm_process,
                              # the rejected file run again: every sample rejected again, as expected
                              **({"max_rejected_fraction": 1.0} if kind == "rejected" else {}))
        res = djx_cli("process", recipe, "--quiet")
        assert res.rc == 0, res.out + res.err
        second = json.loads((tmp_path / kind / "out" / "o.summary.json").read_text())
        assert second["input"] == len(exported) and second["rejected"] == (first["rejected"] if kind == "rejected" else 0)
        if kind != "export":
            continue
        again = _samples(_printed(res.out))
        assert [(r["text"], r["images"]) for r in again] == [(r["text"], r["images"]) for r in exported]
        kept_stats = [r[STATS] for r in _samples(_printed(table))]  # the stats file merged back when beside
        assert [r[STATS] for r in again] == kept_stats and all(kept_stats)
        # every sample reused the stats it carried (in it, or beside it): none was computed again
        assert [op["reused_stats"] for op in second["ops"]] == [first["kept"]] * len(mm_process)


def test_a_sharded_export_is_read_back_by_its_printed_name(tmp_path, text_dataset, write_recipe, djx_cli):
    def run(folder, **keys):
        recipe = write_recipe(tmp_path / folder / "r.yaml", dataset_path=str(text_dataset.path),
                              export_path="out/o.jsonl", np=1, process=[{"text_length_filter": {"min_len": 4}}], **keys)
        return _run(djx_cli, recipe)
    _, plain = run("plain")
    summary, table = run("sharded", export_shard_size=400, keep_stats_in_res_ds=False)  # stats beside, too
    shards = summary["outputs"]["export_files"]
    assert len(shards) > 1 and not Path(summary["outputs"]["export"]).exists()
    name = _printed(table)  # the logical name, with the shards it stands for
    assert name == summary["outputs"]["export"]
    assert f"{len(shards)} shards {shards[0]} ... {shards[-1]}" in table
    for folder, export in (("again_plain", _printed(plain)), ("again_sharded", name)):
        recipe = write_recipe(tmp_path / folder / "r.yaml", dataset_path=export, export_path="out/o.jsonl", np=1,
                              process=[{"text_length_filter": {"min_len": 4}}])
        again, _ = _run(djx_cli, recipe)
        assert again["input"] == summary["kept"] and again["ops"][0]["reused_stats"] == summary["kept"]
    texts = {f: [r["text"] for r in _samples(tmp_path / f / "out" / "o.jsonl")] for f in ("again_plain", "again_sharded")}
    assert texts["again_sharded"] == texts["again_plain"] == [r["text"] for r in _samples(_printed(plain))]
    # a missing shard is an error naming it
    Path(shards[1]).unlink()
    recipe = write_recipe(tmp_path / "broken" / "r.yaml", dataset_path=name, export_path="out/o.jsonl", np=1,
                          process=[{"text_length_filter": {"min_len": 4}}])
    res = djx_cli("process", recipe, "--quiet")
    assert res.rc != 0 and Path(shards[1]).name in res.out + res.err


def _text_run(tmp_path, write_recipe, djx_cli, folder, dataset, min_len, **keys):
    recipe = write_recipe(tmp_path / folder / "r.yaml", dataset_path=str(dataset), export_path="out/o.jsonl",
                          np=1, process=[{"text_length_filter": {"min_len": min_len}}], **keys)
    res = djx_cli("process", recipe, "--quiet")
    assert res.rc == 0, res.out + res.err
    return json.loads((tmp_path / folder / "out" / "o.summary.json").read_text()), res.out + res.err


def test_a_stats_file_that_is_not_the_exports_is_not_used_and_says_why(tmp_path, text_dataset, write_recipe,
                                                                      djx_cli, read_jsonl):
    first, _ = _text_run(tmp_path, write_recipe, djx_cli, "one", text_dataset.path, 4, keep_stats_in_res_ds=False)
    export, stats = tmp_path / "one" / "out" / "o.jsonl", tmp_path / "one" / "out" / "o_stats.jsonl"
    rows = read_jsonl(stats)
    again, out = _text_run(tmp_path, write_recipe, djx_cli, "two", export, 10)
    assert again["ops"][0]["reused_stats"] == first["kept"] and "warning" not in out

    # a row edited (a stat value changed) is not vouched for: computed again, the sample judged on its text
    edited = [dict(r) for r in rows]
    edited[0][STATS] = {"text_len": 1000}
    stats.write_text("".join(json.dumps(r) + "\n" for r in edited))
    again, out = _text_run(tmp_path, write_recipe, djx_cli, "three", export, 10)
    assert again["ops"][0]["reused_stats"] == first["kept"] - 1
    assert read_jsonl(tmp_path / "three" / "out" / "o.jsonl") == read_jsonl(tmp_path / "two" / "out" / "o.jsonl")

    # a record edited since: its row is not its own; the rows are still used for the others
    records = read_jsonl(export)
    stats.write_text("".join(json.dumps(r) + "\n" for r in rows))
    export.write_text("".join(json.dumps({**r, "text": r["text"] + "!"} if i == 2 else r) + "\n"
                              for i, r in enumerate(records)))
    again, out = _text_run(tmp_path, write_recipe, djx_cli, "four", export, 10)
    assert again["ops"][0]["reused_stats"] == first["kept"] - 1 and "warning: 1 row(s) of the stats file" in out

    # a file with a row too few: not this export's, not used at all, saying so
    stats.write_text("".join(json.dumps(r) + "\n" for r in rows[1:]))
    again, out = _text_run(tmp_path, write_recipe, djx_cli, "five", export, 10)
    assert again["ops"][0]["reused_stats"] == 0
    assert f"warning: {stats} not used: it holds {len(rows) - 1} stats rows" in out

    # no summary beside the export says djx wrote the file: not used
    stats.write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "one" / "out" / "o.summary.json").unlink()
    again, out = _text_run(tmp_path, write_recipe, djx_cli, "six", export, 10)
    assert again["ops"][0]["reused_stats"] == 0 and f"warning: {stats} not used: no djx summary" in out


@pytest.mark.models
def test_refiltering_an_export_with_its_stats_beside_loads_no_model(tmp_path, write_recipe, djx_cli, read_jsonl):
    lines = (DEMO / "demo.jsonl").read_text().splitlines(keepends=True)[:40]
    (tmp_path / "d.jsonl").write_text("".join(lines))

    def process(min_score):
        return [{"text_length_filter": {"min_len": 30, "max_len": 1000}},
                {"image_text_similarity_filter": {"hf_clip": CLIP, "min_score": min_score}}]

    def run(folder, dataset, min_score, **keys):
        recipe = write_recipe(tmp_path / folder / "r.yaml", dataset_path=str(dataset), export_path="out/o.jsonl",
                              image_root=str(DEMO), np=1, process=process(min_score), **keys)
        return _run(djx_cli, recipe)
    first, table = run("one", tmp_path / "d.jsonl", 0.2, keep_stats_in_res_ds=False)
    assert first["max_model_loads_per_process"] == 1
    exported = read_jsonl(_printed(table))
    assert exported and all(not any(k.startswith("__dj") for k in r) for r in exported)  # training-ready
    again, out = run("two", _printed(table), 0.23, keep_stats_in_res_ds=False)
    assert again["input"] == first["kept"] and 0 < again["kept"] < first["kept"]
    assert again["max_model_loads_per_process"] == 0 and all(not v for v in again["model_loads"].values())
    assert [op["reused_stats"] for op in again["ops"]] == [first["kept"]] * 2
    fresh, _ = run("fresh", tmp_path / "d.jsonl", 0.23)
    assert read_jsonl(tmp_path / "two" / "out" / "o.jsonl") == \
        [{k: v for k, v in r.items() if not k.startswith("__dj")} for r in read_jsonl(tmp_path / "fresh" / "out" / "o.jsonl")]
    assert fresh["kept"] == again["kept"]


@pytest.mark.parametrize("suffix", [".jsonl", ".json"])
def test_a_llava_export_is_training_ready_and_the_next_runs_input_by_its_printed_name(
        tmp_path, suffix, write_recipe, djx_cli):
    records = [{"id": f"demo-{i:03d}", "image": f"demo-{i:03d}-0.jpg", "conversations": [
        {"from": "human", "value": "<image>\nDescribe the image."},
        {"from": "gpt", "value": "a shape" + " on a plain background" * (i % 3)}]} for i in range(8)]
    data = tmp_path / "llava.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in records))
    process = [{"text_length_filter": {"min_len": 10}}, {"image_shape_filter": {"min_width": 10}}]
    keys = dict(dataset_format="llava", image_root=str(DEMO / "images"), np=1, process=process)
    first, table = _run(djx_cli, write_recipe(tmp_path / "one" / "r.yaml", dataset_path=str(data),
                                              export_path="out/o" + suffix, **keys))
    name = _printed(table)
    exported = _raw(name)
    assert len(exported) == first["kept"] > 0
    # LLaVA records with their stats, nothing else of djx's
    assert all(set(r) == {"id", "image", "conversations", STATS} for r in exported), exported[0]
    again, table2 = _run(djx_cli, write_recipe(tmp_path / "two" / "r.yaml", dataset_path=name,
                                               export_path="out/o" + suffix, **keys))
    assert again["input"] == again["kept"] == first["kept"] and again["rejected"] == 0
    assert [op["reused_stats"] for op in again["ops"]] == [first["kept"]] * 2  # stats and provenance came back
    back = _raw(_printed(table2))
    assert [(r["id"], r["conversations"], r[STATS]) for r in back] == \
        [(r["id"], r["conversations"], r[STATS]) for r in exported]
    assert [Path(r["image"]).name for r in back] == [Path(r["image"]).name for r in exported]
