"""LLaVA's data format: records mapped as Data-Juicer's own tools map them (a fixture DJ computed),
a lossless round trip, `djx convert` streaming any size with bounded memory, bad records rejected
with their reason, image paths resolved, and recipes run on LLaVA data (dataset_format: llava)."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from djx import DjxError, Pipeline, RecipeError, load_recipe
from djx.core.io.llava import LLAVA_KEY, Keys, LlavaOptions, djx_to_llava, llava_to_djx
from djx.core.io.llava_files import convert

from conftest import read_jsonl_file

ASSETS = Path(__file__).parent / "assets"
FIXTURE = json.loads((ASSETS / "dj_fixtures" / "llava_conversion.json").read_text(encoding="utf-8"))
DEMO_IMAGES = ASSETS / "demo" / "images"
DJ_KEYS = Keys(image_token="<image>")  # the text as Data-Juicer's tools leave it: LLaVA's own token

ODD = [  # what real LLaVA files hold besides the plain case
    {"id": 7, "image": "a.jpg", "conversations": [{"from": "human", "value": "<image>\n Q? "},
                                                  {"from": "gpt", "value": "A.\n"}]},
    {"id": "x", "image": "", "conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "yo"}]},
    {"id": "y", "image": "b.jpg", "text": "a key named like djx's text", "images": ["kept", "as is"],
     "conversations": [{"from": "human", "value": "<image>"}, {"from": "gpt", "value": "a caption",
                                                                "markdown": "extra"}]},
    {"id": "z", "image": "c.jpg", "conversations": [{"from": "user1", "value": "<image>\nQ"},
                                                    {"from": "gpt", "value": "[[gpt]]: nested <__dj__image>"}]},
    {"image": "d.jpg", "conversations": [{"from": "human", "value": "Q <image>"}, {"from": "gpt", "value": "A"}]},
]


def _params(case):
    return LlavaOptions(**case["params"])


@pytest.mark.parametrize("case", FIXTURE["cases"], ids=lambda c: json.dumps(c["params"]))
def test_records_map_to_what_data_juicers_llava_to_dj_writes(case):
    opts = _params(case)
    for record, dj in zip(FIXTURE["input"], case["dj"]):
        ours = llava_to_djx(record, opts, DJ_KEYS)
        assert {k: ours[k] for k in dj} == dj
        # besides Data-Juicer's keys: the record's other keys (DJ drops them) and what the round trip needs
        assert set(ours) - set(dj) <= (set(record) - {"image", "conversations"}) | {LLAVA_KEY}
        # with djx's own image token, the same text with LLaVA's <image> replaced by it
        text = llava_to_djx(record, opts)["text"]
        assert text == dj["text"].replace("<image>", "<__dj__image>")


@pytest.mark.parametrize("case", FIXTURE["cases"], ids=lambda c: json.dumps(c["params"]))
def test_records_map_back_as_data_juicers_dj_to_llava_writes(case):
    opts = _params(case)
    for record, dj, back in zip(FIXTURE["input"], case["dj"], case["back"]):
        if opts.only_keep_caption:  # dj_to_llava's restore_questions: the question of the record as read
            dj = {**dj, LLAVA_KEY: {"orig": {"id": record["id"], "conversations": record["conversations"]}}}
        assert djx_to_llava(dj, opts, DJ_KEYS) == back


@pytest.mark.parametrize("case", FIXTURE["cases"], ids=lambda c: json.dumps(c["params"]))
def test_a_record_no_op_changed_goes_back_exactly_as_it_came(case):
    opts = _params(case)
    for record in FIXTURE["input"] + ODD:
        for keys in (Keys(), DJ_KEYS):
            ours = llava_to_djx(record, opts, keys)
            assert djx_to_llava(json.loads(json.dumps(ours)), opts, keys) == record


def test_a_changed_text_is_written_as_turns_again():
    record = FIXTURE["input"][0]
    sample = llava_to_djx(record, LlavaOptions())
    sample["text"] = sample["text"].replace("white and red", "blue")
    back = djx_to_llava(sample, LlavaOptions())
    assert back["conversations"][1] == {"from": "gpt", "value": "The bus in the image is blue."}
    assert back["conversations"][0] == record["conversations"][0] and back["image"] == record["image"]


def _write_array(path: Path, records) -> Path:
    path.write_text(json.dumps(records, indent=1), encoding="utf-8")
    return path


def test_convert_round_trips_a_json_array_and_json_lines(tmp_path, djx_cli):
    records = FIXTURE["input"] + ODD
    src = _write_array(tmp_path / "llava.json", records)
    assert djx_cli("convert", "llava-to-djx", src, tmp_path / "djx.jsonl", "--round-trip").rc == 0
    assert read_jsonl_file(tmp_path / "djx.jsonl")[0]["text"].startswith("[[human]]: <__dj__image>\n")
    assert djx_cli("convert", "djx-to-llava", tmp_path / "djx.jsonl", tmp_path / "back.json").rc == 0
    assert json.loads((tmp_path / "back.json").read_text(encoding="utf-8")) == records
    (tmp_path / "llava.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    assert djx_cli("convert", "llava-to-djx", tmp_path / "llava.jsonl", tmp_path / "djx2.json", "--round-trip").rc == 0
    assert djx_cli("convert", "djx-to-llava", tmp_path / "djx2.json", tmp_path / "back.jsonl").rc == 0
    assert read_jsonl_file(tmp_path / "back.jsonl") == records


def test_convert_takes_data_juicers_options(tmp_path, djx_cli):
    src = _write_array(tmp_path / "llava.json", FIXTURE["input"])
    case = next(c for c in FIXTURE["cases"] if c["params"] == {"only_keep_caption": True})
    res = djx_cli("convert", "llava-to-djx", src, tmp_path / "djx.jsonl", "--option", "only_keep_caption=true",
                  "--option", "image_token=<image>", "--image-special-token", "<image>")
    assert res.rc == 0, res.err
    assert [{k: r[k] for k in ("id", "text", "images")} for r in read_jsonl_file(tmp_path / "djx.jsonl")] == case["dj"]
    res = djx_cli("convert", "llava-to-djx", src, tmp_path / "x.jsonl", "--option", "only_keep_captions=true")
    assert res.rc == 1 and "unknown key 'only_keep_captions'" in res.err


def test_convert_resolves_image_paths_against_the_image_folder(tmp_path, djx_cli):
    records = [{"id": "a", "image": "demo-000-0.jpg", "conversations": [
        {"from": "human", "value": "<image>\nQ"}, {"from": "gpt", "value": "A"}]}]
    src = _write_array(tmp_path / "llava.json", records)
    res = djx_cli("convert", "llava-to-djx", src, tmp_path / "djx.jsonl", "--image-folder", DEMO_IMAGES)
    assert res.rc == 0, res.err
    (sample,) = read_jsonl_file(tmp_path / "djx.jsonl")
    assert sample["images"] == [str(DEMO_IMAGES / "demo-000-0.jpg")] and Path(sample["images"][0]).is_file()
    res = djx_cli("convert", "djx-to-llava", tmp_path / "djx.jsonl", tmp_path / "back.json", "--image-folder",
                  DEMO_IMAGES)
    assert res.rc == 0 and json.loads((tmp_path / "back.json").read_text())[0]["image"] == "demo-000-0.jpg"
    assert djx_cli("convert", "llava-to-djx", src, tmp_path / "y.jsonl", "--image-folder", tmp_path / "no").rc == 1


def test_convert_rejects_bad_records_with_their_reason_and_writes_the_rest(tmp_path, djx_cli):
    good = FIXTURE["input"][0]
    lines = [json.dumps(good), "[1, 2]", '{"id": "cut', json.dumps({"id": "t", "text": "djx's, not LLaVA's"}),
             json.dumps({"id": "odd", "conversations": [{"from": "human", "value": "<image>"}]}),
             json.dumps({"id": "mid", "image": "a.jpg", "conversations": [
                 {"from": "human", "value": "a <image> b"}, {"from": "gpt", "value": "c"}]}),
             json.dumps({"id": "two", "image": ["a.jpg", "b.jpg"], "conversations": good["conversations"]})]
    (tmp_path / "in.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    res = djx_cli("convert", "llava-to-djx", tmp_path / "in.jsonl", tmp_path / "out.jsonl")
    assert res.rc == 1 and "6 records rejected" in res.out
    assert [r["id"] for r in read_jsonl_file(tmp_path / "out.jsonl")] == [good["id"]]
    reasons = {r["line"]: r["reason"] for r in read_jsonl_file(tmp_path / "out.rejected.jsonl")}
    assert all(r.startswith("not a LLaVA record: ") for r in reasons.values())
    assert "not a JSON object" in reasons[2] and "not valid JSON" in reasons[3]
    assert "no 'conversations' key" in reasons[4] and "1 turns, not (human, gpt) pairs" in reasons[5]
    assert "neither at its start nor at its end" in reasons[6] and "one image path" in reasons[7]


MEASURE = """
import resource, sys
from djx.core.io.llava_files import convert
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
done = convert(sys.argv[1], sys.argv[2], "llava-to-djx")
print((done.written, done.rejected), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before)
"""


@pytest.mark.slow
def test_convert_streams_a_big_json_array_in_bounded_memory(tmp_path):
    record = {"id": "0", "image": "00000/000000000.jpg", "conversations": [
        {"from": "human", "value": "Give a short and clear explanation of the subsequent image.\n<image>"},
        {"from": "gpt", "value": "a caption of some thirty words " * 6}]}
    src = tmp_path / "blip_laion_like.json"
    with open(src, "w", encoding="utf-8") as f:  # LLaVA's layout: one array, written as json.dump writes it
        f.write("[")
        for i in range(80_000):
            f.write((", " if i else "") + json.dumps({**record, "id": f"{i:09d}"}))
        f.write("]")
    size = src.stat().st_size
    assert size > 29 << 20  # json.load would hold all of it, several times over as Python objects
    # the peak resident memory the conversion adds, in a process of its own (KiB on Linux)
    out = subprocess.run([sys.executable, "-c", MEASURE, str(src), str(tmp_path / "out.jsonl")], check=True,
                         capture_output=True, text=True).stdout.split()
    assert out[:2] == ["(80000,", "0)"]
    grown = int(out[2]) * 1024
    assert grown < 16 << 20, f"the conversion of a {size >> 20} MB array grew the process by {grown >> 20} MB"
    with open(tmp_path / "out.jsonl", encoding="utf-8") as f:
        last = json.loads(f.readlines()[-1])
    assert last["id"] == "000079999" and last["images"] == ["00000/000000000.jpg"]


# -- recipes on LLaVA data ------------------------------------------------------------------------

def _llava_dataset(tmp_path: Path) -> tuple[Path, list]:
    records = [{"id": f"demo-{i:03d}", "image": f"demo-{i:03d}-0.jpg", "conversations": [
        {"from": "human", "value": "<image>\nDescribe the image."},
        {"from": "gpt", "value": "a shape" + " on a plain background" * (i % 3)}]} for i in range(6)]
    records.insert(2, {"id": "no-token", "image": "demo-006-0.jpg", "conversations": [
        {"from": "human", "value": "Describe it."}, {"from": "gpt", "value": "a shape"}]})
    records.insert(4, {"id": "djx-record", "text": "<__dj__image> a shape", "images": ["demo-007-0.jpg"]})
    return _write_array(tmp_path / "llava.json", records), records


def _run(recipe: Path) -> dict:
    return Pipeline.from_recipe(str(recipe)).run(progress=False, log=lambda *a: None)


def test_a_recipe_runs_on_llava_data_and_writes_llava(tmp_path, write_recipe):
    data, records = _llava_dataset(tmp_path)
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path=str(data), export_path="out/kept.json",
                          dataset_format="llava", image_root=str(DEMO_IMAGES), np=1, image_paths="relative",
                          process=[{"text_length_filter": {"min_len": 90}},
                                   {"image_shape_filter": {"min_width": 100}}])
    _run(recipe)
    kept = json.loads((tmp_path / "out" / "kept.json").read_text(encoding="utf-8"))
    dropped = json.loads((tmp_path / "out" / "kept.dropped.json").read_text(encoding="utf-8"))
    rejected = json.loads((tmp_path / "out" / "kept.rejected.json").read_text(encoding="utf-8"))
    by_id = {r["id"]: r for r in records}
    assert len(kept) + len(dropped) == 6 and kept
    for out in kept + dropped:  # LLaVA records again, image paths resolving from the export's folder
        src = by_id[out["id"]]
        assert out["conversations"] == src["conversations"]
        assert (tmp_path / "out" / out["image"]).resolve() == (DEMO_IMAGES / src["image"]).resolve()
        assert "text" not in out and "images" not in out
    assert all(r["__dj__stats__"]["text_len"] >= 90 and r["__dj__stats__"]["image_width"][0] >= 100 for r in kept)
    reasons = {r["record"]["id"]: r["reason"] for r in rejected}
    assert set(reasons) == {"no-token", "djx-record"}
    assert all(r.startswith("dataset_format llava expects LLaVA records") for r in reasons.values())
    assert "no 'conversations' key" in reasons["djx-record"]
    (no_token,) = [r["record"] for r in rejected if r["record"]["id"] == "no-token"]  # its image resolves too
    assert (tmp_path / "out" / no_token["image"]).resolve() == (DEMO_IMAGES / "demo-006-0.jpg").resolve()


def test_a_llava_export_read_again_reuses_its_stats(tmp_path, write_recipe):
    data, _ = _llava_dataset(tmp_path)
    keys = dict(dataset_format="llava", image_root=str(DEMO_IMAGES), np=1,
                process=[{"text_length_filter": {"min_len": 10}}, {"image_shape_filter": {"min_width": 10}}])
    _run(write_recipe(tmp_path / "a.yaml", dataset_path=str(data), export_path="a/kept.jsonl", **keys))
    summary = _run(write_recipe(tmp_path / "b.yaml", dataset_path="a/kept.jsonl", export_path="b/kept.jsonl", **keys))
    assert [op["reused_stats"] for op in summary["ops"]] == [6, 6]  # djx's signature on the stats holds: the record came back exactly
    first, again = read_jsonl_file(tmp_path / "a" / "kept.jsonl"), read_jsonl_file(tmp_path / "b" / "kept.jsonl")
    same = ("id", "image", "conversations", "__dj__stats__")
    assert [{k: r[k] for k in same} for r in again] == [{k: r[k] for k in same} for r in first]
    # a LLaVA export is training-ready: its records hold the LLaVA keys and the stats, djx's other keys
    # (positions, the stats' provenance) are in the stats file beside it
    assert all(set(r) == {"id", "image", "conversations", "__dj__stats__"} for r in first + again)
    rows = {run: read_jsonl_file(tmp_path / run / "kept_stats.jsonl") for run in ("a", "b")}
    assert [r["__dj__orig_pos__"] for r in rows["b"]] == [r["__dj__pos__"] for r in rows["a"]]


@pytest.mark.parametrize("export", ["kept.json", "kept.jsonl"])
def test_djx_check_vouches_for_a_llava_exports_own_stats_and_notes_an_edited_one(tmp_path, write_recipe, djx_cli,
                                                                                 export):
    """A LLaVA export's records were signed as the djx samples they map to: djx check verifies them
    so (no note), and a stat edited since (its verdict unchanged) is noted by its sample's position."""
    data, _ = _llava_dataset(tmp_path)
    recipe = write_recipe(tmp_path / "a.yaml", dataset_path=str(data), export_path=f"a/{export}",
                          dataset_format="llava", image_root=str(DEMO_IMAGES), np=1,
                          process=[{"text_length_filter": {"min_len": 10}}, {"image_shape_filter": {"min_width": 10}}])
    _run(recipe)
    out = tmp_path / "a" / export
    clean = djx_cli("check", str(out))
    assert clean.rc == 0 and "check passed" in clean.out and "vouch" not in clean.out, clean.out
    stats_file = tmp_path / "a" / f"{out.stem}_stats.jsonl"  # what djx reads a LLaVA record's stats from
    rows = read_jsonl_file(stats_file)
    rows[0]["__dj__stats__"]["text_len"] += 1
    stats_file.write_text("".join(json.dumps(r) + "\n" for r in rows))
    pos = rows[0]["__dj__pos__"]
    edited = djx_cli("check", str(out))
    assert edited.rc == 0 and f"1 of 6 kept and dropped samples carry stats this user's key does not vouch for " \
                               f"(positions {pos})" in edited.out, edited.out


def test_records_the_mapping_keeps_a_residue_of_keep_their_stats_signature(tmp_path, write_recipe, djx_cli):
    """Integer ids, keys on the turns, a key beside them: the mapping keeps what the text cannot say
    in `__dj__llava__`, which a record read back makes anew. The stats signature holds all the
    same: djx check notes nothing and the next run reuses every stat."""
    records = [{"id": i, "image": f"demo-{i:03d}-0.jpg", "source": {"crawl": i}, "conversations": [
        {"from": "human", "value": "<image>\nDescribe the image.", "weight": 0},
        {"from": "gpt", "value": f"a shape number {i}", "weight": 1}]} for i in range(4)]
    data = _write_array(tmp_path / "llava.json", records)
    keys = dict(dataset_format="llava", image_root=str(DEMO_IMAGES), np=1,
                process=[{"text_length_filter": {"min_len": 10}}, {"image_shape_filter": {"min_width": 10}}])
    _run(write_recipe(tmp_path / "a.yaml", dataset_path=str(data), export_path="a/kept.json", **keys))
    first = json.loads((tmp_path / "a" / "kept.json").read_text())
    assert [r["id"] for r in first] == [0, 1, 2, 3] and first[0]["conversations"] == records[0]["conversations"]
    check = djx_cli("check", str(tmp_path / "a" / "kept.json"))
    assert check.rc == 0 and "vouch" not in check.out, check.out
    summary = _run(write_recipe(tmp_path / "b.yaml", dataset_path="a/kept.json", export_path="b/kept.json", **keys))
    assert [op["reused_stats"] for op in summary["ops"]] == [4, 4] and not summary["events"], summary["events"]


def test_format_options_export_djx_writes_djx_records(tmp_path, write_recipe, djx_cli):
    data, _ = _llava_dataset(tmp_path)
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path=str(data), export_path="out/kept.jsonl",
                          dataset_format="llava", format_options={"export": "djx"}, image_root=str(DEMO_IMAGES),
                          np=1, process=[{"image_shape_filter": {"min_width": 10}}])
    _run(recipe)
    kept = read_jsonl_file(tmp_path / "out" / "kept.jsonl")
    assert len(kept) == 6 and all(s["text"].startswith("[[human]]: <__dj__image>\n") for s in kept)
    assert all(Path(s["images"][0]).is_file() for s in kept)
    # converted to LLaVA: the stats go along, the run's bookkeeping (positions, signatures) does not
    assert djx_cli("convert", "djx-to-llava", tmp_path / "out" / "kept.jsonl", tmp_path / "back.json").rc == 0
    back = json.loads((tmp_path / "back.json").read_text())
    assert len(back) == 6 and all(set(r) == {"id", "image", "conversations", "__dj__stats__"} for r in back)


MAPPER = textwrap.dedent('''
    from djx import Mapper, register_op

    @register_op("swap_words_mapper")
    class SwapWordsMapper(Mapper):
        def __init__(self, old: str = "", new: str = "", **common):
            super().__init__(**common)
            self.old, self.new = old, new

        def process(self, batch):
            for sample in batch.samples:
                sample[batch.text_key] = batch.text(sample).replace(self.old, self.new)
''')


def test_text_a_mapper_changed_is_written_back_as_turns_or_rejected(tmp_path, write_recipe):
    data, _ = _llava_dataset(tmp_path)
    (tmp_path / "swap_ops.py").write_text(MAPPER, encoding="utf-8")
    common = dict(dataset_path=str(data), dataset_format="llava", image_root=str(DEMO_IMAGES), np=1,
                  custom_ops=[str(tmp_path / "swap_ops.py")])
    _run(write_recipe(tmp_path / "a.yaml", export_path="a/kept.json",
                      process=[{"swap_words_mapper": {"old": "shape", "new": "circle"}}], **common))
    kept = json.loads((tmp_path / "a" / "kept.json").read_text(encoding="utf-8"))
    assert len(kept) == 6 and all(r["conversations"][1]["value"].startswith("a circle") for r in kept)
    assert all(r["conversations"][0]["value"] == "<image>\nDescribe the image." for r in kept)
    _run(write_recipe(tmp_path / "b.yaml", export_path="b/kept.json", stop_on_systematic_failure=False,
                      max_rejected_fraction=1.0,  # every sample rejected (6 unwritable, 2 broken records): accepted here
                      process=[{"swap_words_mapper": {"old": "[[gpt]]: ", "new": ""}}], **common))
    rejected = json.loads((tmp_path / "b" / "kept.rejected.json").read_text(encoding="utf-8"))
    unwritable = [r for r in rejected if r["code"] == "op_error"]
    assert len(unwritable) == 6 and all("cannot be written as a LLaVA record" in r["reason"]
                                        and "swap_words_mapper" in r["reason"] for r in unwritable)
    assert all(r["record"]["conversations"] for r in unwritable)  # the record as read, for a rerun


def test_llava_records_in_djx_format_are_rejected_naming_the_format(tmp_path, write_recipe):
    data, _ = _llava_dataset(tmp_path)
    _run(write_recipe(tmp_path / "r.yaml", dataset_path=str(data), export_path="out/kept.jsonl", np=1,
                      image_root=str(DEMO_IMAGES), process=[{"text_length_filter": {"min_len": 1}}]))
    rejected = read_jsonl_file(tmp_path / "out" / "kept.rejected.jsonl")
    llava = [r for r in rejected if "conversations" in r["record"]]
    assert len(llava) == 7 and all("set dataset_format: llava" in r["reason"] for r in llava)


def test_format_keys_are_checked_at_load(tmp_path, write_recipe):
    base = dict(dataset_path="d.json", export_path="o.jsonl")
    with pytest.raises(RecipeError, match="unknown key 'only_keep_captions'"):
        load_recipe(str(write_recipe(tmp_path / "a.yaml", dataset_format="llava",
                                     format_options={"only_keep_captions": True}, **base)))
    with pytest.raises(RecipeError, match="djx's own format has no options"):
        load_recipe(str(write_recipe(tmp_path / "b.yaml", format_options={"split_chunk": True}, **base)))
    with pytest.raises(RecipeError, match="dataset_format"):
        load_recipe(str(write_recipe(tmp_path / "c.yaml", dataset_format="mmc4", **base)))
    with pytest.raises(RecipeError, match="image_broadcast needs split_chunk"):
        load_recipe(str(write_recipe(tmp_path / "d.yaml", dataset_format="llava",
                                     format_options={"image_broadcast": True}, **base)))


def test_data_juicers_llava_pretrain_recipe_loads_with_every_op_known(tmp_path):
    path = tmp_path / "llava-pretrain-refine.yaml"
    shutil.copy(ASSETS / "dj_recipes" / "llava-pretrain-refine.yaml", path)
    recipe = load_recipe(str(path), {"dataset_format": "llava", "format_options": {"only_keep_caption": True}})
    assert recipe.run_context().llava == LlavaOptions(only_keep_caption=True)
    assert recipe.image_special_token == "<image>"
    assert recipe.skipped_ops() == []
    # the ops whose resources Data-Juicer downloads say at load what to give (djx never downloads)
    with pytest.raises(RecipeError) as e:
        recipe.build_ops()
    assert "flagged_words_filter" in str(e.value) and "perplexity_filter" in str(e.value)


def test_ray_reads_llava_json_lines_and_writes_what_the_local_executor_writes(ray_address, tmp_path, write_recipe):
    from helpers import assert_same_run, outputs_by_position

    _, records = _llava_dataset(tmp_path)
    data = tmp_path / "llava.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in records) + "not json\n", encoding="utf-8")
    both = {}
    for executor in ("local", "ray"):
        extra = {"ray_address": ray_address} if executor == "ray" else {"start_method": "fork"}
        recipe = write_recipe(tmp_path / f"{executor}.yaml", dataset_path=str(data), executor=executor,
                              export_path=f"{executor}/kept.jsonl", dataset_format="llava",
                              image_root=str(DEMO_IMAGES), np=1, **extra,
                              process=[{"text_length_filter": {"min_len": 90}},
                                       {"image_shape_filter": {"min_width": 100}}])
        both[executor] = (_run(recipe), outputs_by_position(tmp_path / executor))
    assert_same_run(both)
    kept = both["ray"][1]["kept"]
    assert kept and all(set(r) >= {"id", "image", "conversations"} and "text" not in r for r in kept.values())


@pytest.mark.ray
def test_ray_refuses_a_llava_json_array_at_load(tmp_path, write_recipe):
    data, _ = _llava_dataset(tmp_path)
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path=str(data), export_path="out/kept.jsonl",
                          executor="ray", dataset_format="llava", process=[{"text_length_filter": {}}])
    with pytest.raises(DjxError, match="the ray executor reads JSON Lines"):
        _run(recipe)


def test_dry_run_says_to_set_the_format_for_llava_records(tmp_path, write_recipe, djx_cli):
    data = _write_array(tmp_path / "llava.json", FIXTURE["input"])
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path=str(data), export_path="out/kept.jsonl",
                          process=[{"text_length_filter": {}}])
    res = djx_cli("process", recipe, "--dry-run")
    assert res.rc == 1 and "a LLaVA record: set dataset_format: llava" in res.out + res.err
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path=str(data), export_path="out/kept.jsonl",
                          dataset_format="llava", process=[{"text_length_filter": {}}])
    res = djx_cli("process", recipe, "--dry-run")
    assert "4 usable" in res.out, res.out + res.err


def test_a_turn_a_mapper_left_alone_comes_back_as_it_was_and_a_changed_one_keeps_its_keys(tmp_path, write_recipe):
    """A mapper changes the one text of a record's turns: the turns are read from it again, each with
    its original's keys (weights, languages, scores) and, where the mapper left it alone, exactly as
    it was (its whitespace too)."""
    records = [
        {"id": "a", "image": "demo-000-0.jpg", "conversations": [
            {"from": "human", "value": "<image>\nQ http://z.org please", "weight": 1, "lang": "en"},
            {"from": "gpt", "value": "\u2003padded answer  ", "score": 0.9}]},
        {"id": "b", "image": "demo-001-0.jpg", "conversations": [
            {"from": "human", "value": "<image>\nQ"}, {"from": "gpt", "value": "multi\n\nparagraph\n"},
            {"from": "human", "value": "Q2 http://k.com"}, {"from": "gpt", "value": "A2"}]},
        {"id": "c", "image": "demo-002-0.jpg", "conversations": [
            {"from": "human", "value": "<image>\n[[gpt]]: a marker http://x.com"}, {"from": "gpt", "value": "y"}]},
    ]
    data = _write_array(tmp_path / "llava.json", records)
    _run(write_recipe(tmp_path / "r.yaml", dataset_path=str(data), dataset_format="llava",
                      image_root=str(DEMO_IMAGES), np=1, export_path="out/kept.json",
                      stop_on_systematic_failure=False, process=[{"clean_links_mapper": {}}]))
    kept = {r["id"]: r["conversations"] for r in json.loads((tmp_path / "out" / "kept.json").read_text())}
    assert kept["a"] == [{"from": "human", "value": "<image>\nQ  please", "weight": 1, "lang": "en"},
                         records[0]["conversations"][1]]
    assert kept["b"] == [records[1]["conversations"][0], records[1]["conversations"][1],
                         {"from": "human", "value": "Q2"}, records[1]["conversations"][3]]
    [rejected] = json.loads((tmp_path / "out" / "kept.rejected.json").read_text())
    assert rejected["record"]["id"] == "c" and "holds a role marker such as '[[gpt]]: '" in rejected["reason"]
    assert "--round-trip" not in rejected["reason"]
    # a change at a turn's very ends is a change too: written as Data-Juicer's cleaning leaves it
    _run(write_recipe(tmp_path / "w.yaml", dataset_path=str(data), dataset_format="llava",
                      image_root=str(DEMO_IMAGES), np=1, export_path="w/kept.json", stop_on_systematic_failure=False,
                      process=[{"whitespace_normalization_mapper": {}}]))
    kept = {r["id"]: r["conversations"] for r in json.loads((tmp_path / "w" / "kept.json").read_text())}
    assert kept["a"] == [records[0]["conversations"][0], {"from": "gpt", "value": "padded answer", "score": 0.9}]
