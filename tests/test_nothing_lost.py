"""No sample is lost: bad input, op errors and dying workers become rejected records with reasons,
and input = kept + dropped + rejected, with every position exactly once."""
import json

import pytest
from PIL import Image

from djx import DjxError, Pipeline
from djx.core.run.check import check_outputs
from djx.core.recipe.recipe import recipe_from_dict

from conftest import PLUGINS_DIR, read_jsonl_file

CHAOS = str(PLUGINS_DIR / "chaos_ops.py")
SHAPE = {"image_shape_filter": {"min_width": 8, "min_height": 8}}
TEXT = {"text_length_filter": {"min_len": 3}}


def run(tmp_path, lines, process, **keys):
    data = tmp_path / "data.jsonl"
    data.write_text("".join(l + "\n" for l in lines), encoding="utf-8")
    recipe = recipe_from_dict({"dataset_path": str(data), "export_path": str(tmp_path / "out/o.jsonl"),
                               "process": process, "start_method": "fork", "custom_ops": [CHAOS],
                               **keys}, base_dir=str(tmp_path))
    summary = Pipeline(recipe=recipe).run(progress=False, log=lambda *a: None)
    out = tmp_path / "out"
    rejected = {r["__dj__pos__"]: r for r in read_jsonl_file(out / "o.rejected.jsonl")}
    return summary, rejected


def assert_accounted(summary, n):
    assert summary["input"] == n == summary["kept"] + summary["dropped"] + summary["rejected"]
    assert summary["check"]["ok"], summary["check"]


@pytest.fixture
def images(tmp_path):
    d = tmp_path / "img"
    d.mkdir()
    Image.new("RGB", (32, 32), "blue").save(d / "ok.png")
    Image.effect_noise((256, 256), 60).convert("RGB").save(d / "full.jpg", quality=95)
    data = (d / "full.jpg").read_bytes()
    (d / "truncated.jpg").write_bytes(data[: len(data) * 2 // 3])  # header intact, pixels cut
    (d / "garbage.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"not really a png" * 10)
    (d / "empty.jpg").write_bytes(b"")
    Image.new("1", (4000, 3000)).save(d / "huge.png")  # 12 Mpx, tiny file
    return d


def test_each_kind_of_bad_input_is_rejected_with_a_reason(tmp_path, images):
    good = json.dumps({"text": "fine text", "images": ["img/ok.png"]})
    lines = [
        good,                                                        # 0 kept
        "{not json",                                                 # 1
        "[1, 2, 3]",                                                 # 2
        json.dumps({"caption": "no text key", "images": []}),        # 3
        json.dumps({"text": 42, "images": []}),                      # 4
        json.dumps({"text": "images a number", "images": 7}),                # 5
        json.dumps({"text": "images not strings", "images": [1, 2]}),        # 6
        json.dumps({"text": "missing file", "images": ["img/nope.png"]}),    # 7
        json.dumps({"text": "truncated", "images": ["img/truncated.jpg"]}),  # 8 kept
        json.dumps({"text": "garbage", "images": ["img/garbage.png"]}),      # 9
        json.dumps({"text": "empty file", "images": ["img/empty.jpg"]}),     # 10
        json.dumps({"text": "bomb", "images": ["img/huge.png"]}),            # 11
        "",                                                          # blank: skipped, counted
        good,                                                        # 12 kept
        json.dumps({"text": "a url", "images": ["https://example.com/a.jpg"]}),  # 13
        json.dumps({"text": "empty path", "images": [""]}),                      # 14
        json.dumps({"text": "nul", "images": ["img/ok\u0000.png"]}),             # 15
    ]
    summary, rej = run(tmp_path, lines, [TEXT, SHAPE, {"poison_filter": {}}], max_image_pixels=10_000_000)
    assert_accounted(summary, 16)
    # the truncated JPEG's header is intact: header-only filters keep it (decoding ops reject it)
    assert summary["blank_lines"] == 1 and summary["kept"] == 3
    assert "not valid JSON" in rej[1]["reason"] and rej[1]["raw"] == "{not json" and rej[1]["line"] == 2
    assert "not a JSON object" in rej[2]["reason"] and rej[2]["record"] == [1, 2, 3]
    assert "missing text key 'text'" in rej[3]["reason"]
    assert "not a string" in rej[4]["reason"]
    assert "an image path or a list of them" in rej[5]["reason"] and "a list of them" in rej[6]["reason"]
    assert "file not found" in rej[7]["reason"] and rej[7]["op"] == "image_shape_filter"
    assert "garbage.png" in rej[9]["reason"] and "cannot open" in rej[9]["reason"]
    assert "empty.jpg" in rej[10]["reason"] and "an empty file (0 bytes)" in rej[10]["reason"]
    assert "exceeds the limit of 10000000" in rej[11]["reason"]
    assert "a URL; djx reads local files" in rej[13]["reason"] and "an empty path" in rej[14]["reason"]
    assert "a path with a NUL byte names no file" in rej[15]["reason"] and "truncated" not in rej[15]["reason"]
    assert set(rej) == {1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 13, 14, 15}
    assert {pos: r["code"] for pos, r in rej.items()} == {
        1: "bad_input", 2: "bad_input", 3: "bad_input", 4: "bad_input", 5: "bad_input", 6: "bad_input",
        7: "bad_image", 9: "bad_image", 10: "bad_image", 11: "bad_image", 13: "bad_image", 14: "bad_image",
        15: "bad_image"}
    for r in rej.values():
        assert r["reason"] and ("record" in r or "raw" in r)


def test_a_path_with_a_nul_byte_is_a_bad_image_for_the_file_size_too(tmp_path, images):
    from djx import Pipeline
    from djx.ops.filter.image_size_filter import ImageSizeFilter
    pipe = Pipeline(ops=[ImageSizeFilter()])
    good = str(tmp_path / "img" / "ok.png")
    kept = list(pipe.process([{"text": "x", "images": [good + "\x00"]}, {"text": "y", "images": [good]}]))
    [rejected] = pipe.last_counts["rejected_records"]
    assert len(kept) == 1 and rejected["code"] == "bad_image" and "NUL byte" in rejected["reason"]


def test_a_truncated_image_is_rejected_when_pixels_are_decoded(tmp_path, images):
    from djx.core.errors import SampleError
    from djx.core.op.images import BatchImages
    imgs = BatchImages(str(tmp_path), 10**9)
    assert imgs.size("img/truncated.jpg") == (256, 256)  # the header is intact
    with pytest.raises(SampleError, match="truncated.jpg.*cannot decode"):
        imgs.rgb("img/truncated.jpg")


def test_an_op_error_rejects_only_that_sample_not_its_batch(tmp_path):
    lines = [json.dumps({"text": f"sample {i}", "boom": i == 5}) for i in range(12)]
    summary, rej = run(tmp_path, lines, [{"poison_filter": {}}], batch_size=6, np=1)
    assert_accounted(summary, 12)
    assert list(rej) == [5] and summary["kept"] == 11
    assert "ValueError: cannot handle 'sample 5'" in rej[5]["reason"] and rej[5]["op"] == "poison_filter"
    assert rej[5]["code"] == "op_error" and "chaos_ops.py" in rej[5]["reason"]


@pytest.mark.parametrize("how", [pytest.param("kill", marks=pytest.mark.slow), "segfault"])
def test_a_worker_that_dies_is_replaced_and_only_the_poison_sample_is_rejected(tmp_path, how):
    lines = [json.dumps({"text": f"sample {i}", "poison": i in (7, 30)}) for i in range(40)]
    summary, rej = run(tmp_path, lines, [TEXT, {"poison_filter": {"how": how}}], np=2, batch_size=8)
    assert_accounted(summary, 40)
    assert sorted(rej) == [7, 30] and summary["kept"] == 38
    for r in rej.values():
        assert r["code"] == "worker_died" and "worker died while running poison_filter" in r["reason"]
        assert r["record"]["text"] == f"sample {r['__dj__pos__']}"  # the input record, not lost
    assert summary["worker_restarts"] >= 2
    kept = read_jsonl_file(tmp_path / "out" / "o.jsonl")
    assert [k["__dj__pos__"] for k in kept] == [i for i in range(40) if i not in (7, 30)]


def test_on_error_fail_stops_at_the_first_bad_sample_with_the_same_message(tmp_path):
    lines = [json.dumps({"text": "fine text"}), "{oops", json.dumps({"text": "fine text"})]
    with pytest.raises(DjxError, match="line 2: not valid JSON.*on_error: reject"):
        run(tmp_path, lines, [TEXT], on_error="fail", np=1)


def test_an_empty_input_file_gives_zero_counts_and_succeeds(tmp_path):
    summary, rej = run(tmp_path, [], [TEXT])
    assert summary["input"] == summary["kept"] == summary["rejected"] == 0 and rej == {}
    assert (tmp_path / "out" / "o.jsonl").read_text() == ""


def test_the_count_check_names_a_lost_or_duplicated_sample(tmp_path):
    lines = [json.dumps({"text": f"sample {i}"}) for i in range(6)]
    run(tmp_path, lines, [TEXT])
    out = tmp_path / "out"
    kept = (out / "o.jsonl").read_text().splitlines()
    (out / "o.jsonl").write_text("\n".join(kept[:-1] + [kept[0]]) + "\n")
    report = check_outputs(str(out / "o.jsonl"), str(out / "o.dropped.jsonl"),
                           str(out / "o.rejected.jsonl"), [("text_length_filter", ("text_len",))],
                           input_count=6)
    assert not report.ok
    assert any("more than once" in k for k in report.problems)
    assert report.problems["input sample missing from every output"] == [5]
