"""`djx convert` never destroys its input, never writes a lossy conversion as a success, says a
failure to write in one line and leaves no `.part` behind, and writes image paths `djx process`
finds where it reads the output."""
from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

from conftest import read_jsonl_file

ASSETS = Path(__file__).parent / "assets"
DEMO_IMAGES = ASSETS / "demo" / "images"


def _llava(i: int, image: str = "") -> dict:
    return {"id": f"r{i:04d}", "image": image or f"demo-{i % 8:03d}-0.jpg", "conversations": [
        {"from": "human", "value": "<image>\nDescribe the image."}, {"from": "gpt", "value": f"a shape number {i}"}]}


def _jsonl(path: Path, records) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob("*.part"))


# -- A: the input is never an output ----------------------------------------------------------------

def test_convert_refuses_to_write_its_rejects_over_its_input(tmp_path, djx_cli):
    """The rejects of `x.jsonl` are `x.rejected.jsonl`: converting that file into x.jsonl would
    truncate it while it is read."""
    src = _jsonl(tmp_path / "x.rejected.jsonl", [_llava(i) for i in range(1000)] + [{"bad": 1}])
    before = src.read_bytes()
    res = djx_cli("convert", "llava-to-djx", src, tmp_path / "x.jsonl")
    assert res.rc == 1 and res.err.startswith("djx: error: convert: the rejects file ")
    assert "is the input file" in res.err and "another name" in res.err
    assert src.read_bytes() == before and not (tmp_path / "x.jsonl").exists()


def test_convert_refuses_an_output_that_is_its_input_and_never_writes_a_partial_name(tmp_path, djx_cli):
    src = tmp_path / "d.json"
    src.write_text(json.dumps([_llava(i) for i in range(5)]), encoding="utf-8")
    before = src.read_bytes()
    res = djx_cli("convert", "llava-to-djx", src, src)
    assert res.rc == 1 and "the output file" in res.err and "is the input file" in res.err
    # a hard link under the name a partial output once had: partial outputs now get fresh random
    # names, so the input is never written and the conversion goes through
    os.link(src, tmp_path / "e.json.part")
    res = djx_cli("convert", "llava-to-djx", src, tmp_path / "e.json")
    assert res.rc == 0, res.err
    assert src.read_bytes() == before and len(json.loads((tmp_path / "e.json").read_text())) == 5


# -- B: no lossy conversion passes as a success -------------------------------------------------------

def test_an_empty_sentence_separator_is_refused(tmp_path, djx_cli):
    src = _jsonl(tmp_path / "l.jsonl", [_llava(i) for i in range(3)])
    res = djx_cli("convert", "llava-to-djx", src, tmp_path / "d.jsonl", "--option", "sent_separator=")
    assert res.rc == 1 and "sent_separator: '' joins the turns" in res.err and "such as" in res.err
    assert not (tmp_path / "d.jsonl").exists()
    djx = _jsonl(tmp_path / "d2.jsonl", [{"id": "a", "text": "[[human]]: <__dj__image>\nQ\n[[gpt]]: A <|__dj__eoc|>",
                                          "images": ["a.jpg"]}])
    res = djx_cli("convert", "djx-to-llava", djx, tmp_path / "back.json", "--option", "sent_separator=")
    assert res.rc == 1 and "sent_separator" in res.err and not (tmp_path / "back.json").exists()



def test_an_option_value_that_is_not_yaml_is_one_line_saying_how_to_quote_it(tmp_path, djx_cli):
    src = _jsonl(tmp_path / "l.jsonl", [_llava(i) for i in range(3)])
    res = djx_cli("convert", "llava-to-djx", src, tmp_path / "d.jsonl", "--option", "image_token=[")
    assert res.rc == 1 and "Traceback" not in res.err and not (tmp_path / "d.jsonl").exists()
    assert res.err.strip() == ("djx: error: --option image_token=[: the value is not valid YAML (while parsing a "
                               "flow node); quote a string value, e.g. --option 'image_token=\"[\"'")

NO_EOC = ("--option", "add_eoc_at_last=false")


def test_a_record_its_text_cannot_give_back_is_rejected_unless_the_round_trip_is_asked(tmp_path, djx_cli):
    """A separator that also ends the last turn (no end-of-chunk token after it) is cut off reading it
    back: that record is rejected, saying why, instead of written as if the conversion were faithful."""
    records = [_llava(0), {**_llava(1), "conversations": [{"from": "human", "value": "<image>\nQ."},
                                                         {"from": "gpt", "value": "The end."}]}]
    src = _jsonl(tmp_path / "l.jsonl", records)
    res = djx_cli("convert", "llava-to-djx", src, tmp_path / "d.jsonl", "--option", "sent_separator=.", *NO_EOC)
    assert res.rc == 1 and "1 records rejected" in res.out
    (rej,) = read_jsonl_file(tmp_path / "d.rejected.jsonl")
    assert rej["record"]["id"] == "r0001" and "reads back as" in rej["reason"] and "--round-trip" in rej["reason"]
    res = djx_cli("convert", "llava-to-djx", src, tmp_path / "rt.jsonl", "--option", "sent_separator=.", *NO_EOC,
                  "--round-trip")
    assert res.rc == 0 and not (tmp_path / "rt.rejected.jsonl").exists()
    assert djx_cli("convert", "djx-to-llava", tmp_path / "rt.jsonl", tmp_path / "back.jsonl",
                   "--option", "sent_separator=.", *NO_EOC).rc == 0
    assert read_jsonl_file(tmp_path / "back.jsonl") == records


# -- C: failures to write: one line, no .part ----------------------------------------------------------

def test_convert_makes_a_missing_output_folder(tmp_path, djx_cli):
    src = _jsonl(tmp_path / "l.jsonl", [_llava(0)])
    res = djx_cli("convert", "llava-to-djx", src, tmp_path / "new" / "deeper" / "d.jsonl")
    assert res.rc == 0, res.err
    assert len(read_jsonl_file(tmp_path / "new" / "deeper" / "d.jsonl")) == 1


def test_convert_under_a_file_is_one_line(tmp_path, djx_cli):
    src = _jsonl(tmp_path / "l.jsonl", [_llava(0)])
    res = djx_cli("convert", "llava-to-djx", src, tmp_path / "l.jsonl" / "d.jsonl")
    assert res.rc == 1 and res.err.startswith("djx: error: convert: cannot write under ")
    assert "is a file, not a folder" in res.err and len(res.err.strip().splitlines()) == 1


FULL_DISK = """
import resource, signal, sys
from djx.cli import main
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # past the limit a write fails (EFBIG), as on a full disk
resource.setrlimit(resource.RLIMIT_FSIZE, (64 << 10, 64 << 10))
sys.exit(main(sys.argv[1:]))
"""


def test_a_write_that_fails_midway_is_one_line_and_leaves_no_part(tmp_path):
    records = [_llava(i) for i in range(2000)] + [{"bad": i} for i in range(2000)]  # both outputs past 64 KiB
    src = _jsonl(tmp_path / "l.jsonl", records)
    (tmp_path / "out").mkdir()
    for out in ("d.jsonl", "d.json"):
        res = subprocess.run([sys.executable, "-c", FULL_DISK, "convert", "llava-to-djx", str(src),
                              str(tmp_path / "out" / out)], capture_output=True, text=True, timeout=120)
        assert res.returncode == 1 and "Traceback" not in res.stderr, res.stderr
        assert res.stderr.startswith("djx: error: convert: cannot write ") and "nothing was written" in res.stderr
        assert len(res.stderr.strip().splitlines()) == 1
        assert sorted(p.name for p in (tmp_path / "out").iterdir()) == []


# -- D: image paths djx process finds; only_keep_caption; no copy of every record ----------------------

def test_a_relative_image_folder_gives_paths_djx_process_finds(tmp_path, write_recipe):
    """Typed relative to the shell's folder, written relative to the output's: the recipe beside the
    output then finds every image."""
    work = tmp_path / "work"
    (work / "pics").mkdir(parents=True)
    (work / "data").mkdir()
    for name in sorted(os.listdir(DEMO_IMAGES))[:8]:
        (work / "pics" / name).write_bytes((DEMO_IMAGES / name).read_bytes())
    _jsonl(work / "llava.jsonl", [_llava(i) for i in range(8)])
    res = subprocess.run([sys.executable, "-m", "djx.cli", "convert", "llava-to-djx", "llava.jsonl",
                          "data/djx.jsonl", "--image-folder", "pics"], cwd=work, capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stderr
    samples = read_jsonl_file(work / "data" / "djx.jsonl")
    assert all(s["images"][0].startswith("../pics/") for s in samples)
    recipe = write_recipe(work / "data" / "r.yaml", dataset_path="djx.jsonl", export_path="out/kept.jsonl", np=1,
                          process=[{"image_shape_filter": {"min_width": 1}}])
    res = subprocess.run([sys.executable, "-m", "djx.cli", "process", str(recipe), "--quiet"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    summary = json.loads((work / "data" / "out" / "kept.summary.json").read_text())
    assert (summary["kept"], summary["rejected"]) == (8, 0)


def test_only_keep_caption_warns_of_extra_image_tokens_and_keeps_no_copy_unless_asked(tmp_path, djx_cli):
    two_turns = {**_llava(1), "conversations": _llava(1)["conversations"] * 2}
    records = [_llava(0), two_turns, two_turns | {"id": "r0002"}]
    src = _jsonl(tmp_path / "l.jsonl", records)
    res = djx_cli("convert", "llava-to-djx", src, tmp_path / "d.jsonl", "--option", "only_keep_caption=true")
    assert res.rc == 0, res.err
    assert "warning: 2 records have more image tokens (<__dj__image>) in their text than images" in res.out
    assert "only_keep_caption" in res.out and "image_text_similarity_filter" in res.out
    plain = read_jsonl_file(tmp_path / "d.jsonl")
    assert all(set(s) == {"id", "text", "images"} for s in plain)  # no copy of the record beside it
    res = djx_cli("convert", "llava-to-djx", src, tmp_path / "rt.jsonl", "--option", "only_keep_caption=true",
                  "--round-trip")
    assert res.rc == 0
    assert djx_cli("convert", "djx-to-llava", tmp_path / "rt.jsonl", tmp_path / "back.jsonl",
                   "--option", "only_keep_caption=true").rc == 0
    assert read_jsonl_file(tmp_path / "back.jsonl") == records
    res = djx_cli("convert", "djx-to-llava", tmp_path / "d.jsonl", tmp_path / "no.jsonl",
                  "--option", "only_keep_caption=true")
    assert res.rc == 1 and "--round-trip" in read_jsonl_file(tmp_path / "no.rejected.jsonl")[0]["reason"]


def test_convert_warns_when_image_paths_name_no_file_under_the_image_folder(tmp_path, djx_cli):
    """A wrong --image-folder (one level off) is said at convert time, with a path to look at, not
    discovered as every sample rejected by a later `djx process`."""
    src = _jsonl(tmp_path / "l.jsonl", [_llava(i) for i in range(6)] + [_llava(6, image="gone.jpg")])
    res = djx_cli("convert", "llava-to-djx", src, tmp_path / "ok.jsonl", "--image-folder", DEMO_IMAGES)
    assert res.rc == 0, res.err
    assert "warning: 1 image path(s) name no file (the first: " + str(DEMO_IMAGES / "gone.jpg") + ")" in res.out
    res = djx_cli("convert", "llava-to-djx", src, tmp_path / "off.jsonl", "--image-folder", DEMO_IMAGES.parent)
    assert res.rc == 0 and "warning: 7 image path(s) name no file" in res.out and "--image-folder" in res.out
    assert len(read_jsonl_file(tmp_path / "off.jsonl")) == 7  # written all the same: the paths are the user's
