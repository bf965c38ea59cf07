"""What a rejected image's reason says: a URL or a data: URI is named as such and never joined to a
folder (in the outputs or by `djx convert`), a long reference is cut in the reason, an empty file
is called empty, a file Pillow cannot identify gets no truncation hint, and a format whose
decoder is not installed says so instead of suggesting load_truncated_images."""
from __future__ import annotations

import base64
import io
import json
import shutil

import pytest
from PIL import Image

from djx.core.errors import SampleError
from djx.core.io.image_paths import ImagePathWriter
from djx.core.op.images import BatchImages


def png_uri(size=(200, 200)) -> str:
    buf = io.BytesIO()
    Image.effect_noise(size, 50).convert("RGB").save(buf, "PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def reason(tmp_path, ref, load_truncated=False, call="rgb") -> str:
    imgs = BatchImages(str(tmp_path), 10**9, load_truncated_images=load_truncated)
    with pytest.raises(SampleError) as e:
        getattr(imgs, call)(ref)
    assert e.value.code == "bad_image"
    return str(e.value)


@pytest.mark.parametrize("call", ["rgb", "size"])
def test_a_data_uri_is_named_and_cut_in_the_reason(tmp_path, call):
    uri = png_uri()
    assert len(uri) > 50_000
    why = reason(tmp_path, uri, call=call)
    assert "a data: URI; djx reads local files" in why and len(why) < 400, why
    assert f"{len(repr(uri)):,} characters" in why


def test_a_long_missing_path_is_cut_in_the_reason(tmp_path):
    why = reason(tmp_path, "x" * 200 + "/" + "y" * 200 + ".jpg")
    assert why.count("x" * 100) == 1 and len(why) < 600, why


@pytest.mark.parametrize("load_truncated", [False, True])
def test_an_empty_file_and_a_text_file_are_named_for_what_they_are(tmp_path, load_truncated):
    (tmp_path / "empty.jpg").write_bytes(b"")
    (tmp_path / "page.jpg").write_text("<html>not an image</html>")
    empty, page = reason(tmp_path, "empty.jpg", load_truncated), reason(tmp_path, "page.jpg", load_truncated)
    assert "an empty file (0 bytes)" in empty, empty
    assert "not a readable image file" in page and "load_truncated" not in page, page


def test_a_truncated_file_keeps_its_hint(tmp_path):
    buf = io.BytesIO()
    Image.effect_noise((128, 128), 60).convert("RGB").save(buf, "JPEG", quality=95)
    (tmp_path / "cut.jpg").write_bytes(buf.getvalue()[: buf.tell() * 2 // 3])
    assert "load_truncated_images: true keeps what decodes" in reason(tmp_path, "cut.jpg")


def test_an_eps_without_ghostscript_says_a_decoder_is_missing(tmp_path):
    Image.new("RGB", (24, 16), "red").save(tmp_path / "a.eps")
    imgs = BatchImages(str(tmp_path), 10**9, load_truncated_images=True)
    if shutil.which("gs"):  # a machine with Ghostscript decodes it
        assert imgs.rgb("a.eps").size == (24, 16)
        return
    why = reason(tmp_path, "a.eps", load_truncated=True)
    assert "a decoder this format needs is not installed" in why and "truncated" not in why, why


def test_outputs_write_urls_and_data_uris_as_they_are(tmp_path):
    writer = ImagePathWriter(str(tmp_path / "in"), str(tmp_path / "out"), "absolute", ("images",))
    refs = ["data:image/png;base64,ab//cd==", "s3://bucket//x.jpg", "http://example.com/a.jpg", "a.jpg"]
    assert writer.rewrite({"images": list(refs)})["images"] == refs[:3] + [str(tmp_path / "in" / "a.jpg")]


def test_convert_with_an_image_folder_leaves_urls_and_data_uris_as_they_are(tmp_path, djx_cli):
    (tmp_path / "img").mkdir()
    Image.new("RGB", (8, 8)).save(tmp_path / "img" / "a.jpg")
    refs = ["data:image/png;base64,ab//cd==", "s3://bucket//x.jpg", "http://example.com/a.jpg", "a.jpg"]
    turns = [{"from": "human", "value": "<image>\nWhat?"}, {"from": "gpt", "value": "A thing."}]
    (tmp_path / "llava.json").write_text(json.dumps([{"id": str(i), "image": r, "conversations": turns}
                                                      for i, r in enumerate(refs)]))
    res = djx_cli("convert", "llava-to-djx", tmp_path / "llava.json", tmp_path / "conv" / "c.jsonl",
                  "--image-folder", tmp_path / "img")
    assert res.rc == 0, res.err
    assert "3 image reference(s) are URLs or data: URIs, written as they are" in res.out + res.err
    rows = [json.loads(line) for line in (tmp_path / "conv" / "c.jsonl").read_text().splitlines()]
    assert [r["images"] for r in rows] == [[r] for r in refs[:3]] + [[str(tmp_path / "img" / "a.jpg")]]
    back = djx_cli("convert", "djx-to-llava", tmp_path / "conv" / "c.jsonl", tmp_path / "back.json",
                   "--image-folder", tmp_path / "img")
    assert back.rc == 0, back.err
    assert [r["image"] for r in json.loads((tmp_path / "back.json").read_text())] == refs


def test_convert_round_trip_gives_back_every_spelling_of_an_image_path(tmp_path, djx_cli):
    """--image-folder normalises what it joins (./a.jpg, x/../a.jpg, an absolute path under the
    folder); --round-trip keeps those spellings, so djx-to-llava writes them back byte for byte. A
    path that climbs out of the folder is warned about; a null id stays null."""
    (tmp_path / "imgs").mkdir()
    Image.new("RGB", (8, 8)).save(tmp_path / "imgs" / "a.jpg")
    (tmp_path / "other.jpg").write_bytes((tmp_path / "imgs" / "a.jpg").read_bytes())
    spellings = ["a.jpg", ".//a.jpg", "sub/../a.jpg", "../imgs/a.jpg", str(tmp_path / "imgs" / "a.jpg"), "../other.jpg"]
    turns = [{"from": "human", "value": "<image>\nWhat?"}, {"from": "gpt", "value": "A thing."}]
    records = [{"id": None if i == 2 else str(i), "image": p, "conversations": turns} for i, p in enumerate(spellings)]
    (tmp_path / "l.json").write_text(json.dumps(records))
    for flags, same in (((), False), (("--round-trip",), True)):
        res = djx_cli("convert", "llava-to-djx", tmp_path / "l.json", tmp_path / "c" / "c.jsonl",
                      "--image-folder", tmp_path / "imgs", *flags)
        assert res.rc == 0, res.err
        assert "1 image path(s) lead outside --image-folder (the first: ../other.jpg)" in res.out + res.err
        back = djx_cli("convert", "djx-to-llava", tmp_path / "c" / "c.jsonl", tmp_path / "back.json",
                       "--image-folder", tmp_path / "imgs")
        assert back.rc == 0, back.err
        got = json.loads((tmp_path / "back.json").read_text())
        assert [r["id"] for r in got] == [r["id"] for r in records]
        assert ([r["image"] for r in got] == spellings) == same, [r["image"] for r in got]
