"""`djx analyze` after a run with deduplicators: per deduplicator, how many duplicate groups it
found, how many samples it removed and how large the groups are (largest first), printed and on
report.html, where each of the largest groups shows the kept sample first, then its duplicates side
by side, as thumbnails with their texts. Text-only groups show their texts; a run without
deduplicators has no such section."""
from __future__ import annotations

import json
import os
import re
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

pytestmark = pytest.mark.slow  # each test runs `djx process` (a worker process)


def noise_image(folder: Path, name: str, seed: int) -> str:
    """A picture of its own (random noise from `seed`): files made from one seed are exact copies."""
    folder.mkdir(parents=True, exist_ok=True)
    pixels = np.random.default_rng(seed).integers(0, 256, (48, 64, 3), dtype=np.uint8)
    Image.fromarray(pixels).save(folder / name)
    return str(folder / name)


def run_and_analyze(tmp_path: Path, rows: list[dict], process: list[dict], write_recipe, djx_cli, **keys):
    """`djx process` on the rows, then `djx analyze` on its export -> (printed text, report.html, out dir)."""
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    export = tmp_path / "out" / "kept.jsonl"
    recipe = write_recipe(tmp_path / "recipe.yaml", dataset_path=str(data), export_path=str(export),
                          np=1, batch_size=4, process=process, **keys)
    ran = djx_cli("process", recipe)
    assert ran.rc == 0, ran.out + ran.err
    analyzed = djx_cli("analyze", export)
    assert analyzed.rc == 0, analyzed.out + analyzed.err
    folder = tmp_path / "out" / "kept.analysis"
    return analyzed.out, (folder / "report.html").read_text(encoding="utf-8"), folder


def section(html: str) -> str:
    """The page's duplicate groups section ('' when it has none)."""
    start = html.find('<h2 id="duplicate-groups">')
    return "" if start < 0 else html[start:html.index('<h2 id="galleries">')]


def ops_on_page(html: str) -> dict[str, str]:
    """Deduplicator name -> its part of the section."""
    parts = re.split(r'(?=<div class="dedup-op")', section(html))[1:]
    return {re.search(r'data-op="([^"]+)"', p).group(1): p for p in parts}


def groups_on_page(part: str) -> list[dict]:
    """The groups shown for one deduplicator, in page order: kept position, size, and its members
    (position, role, thumbnail sources and image paths, text) in page order."""
    out = []
    for g in re.split(r'(?=<div class="dup-group")', part)[1:]:
        members = []
        for m in re.split(r'(?=<figure class="dup-member)', g)[1:]:
            members.append({"pos": int(re.search(r'data-pos="(\d+)"', m).group(1)),
                            "role": re.match(r'<figure class="dup-member (\w+)', m).group(1),
                            "thumbs": re.findall(r'<img class="thumb" src="([^"]+)"', m),
                            "images": re.findall(r'<img class="thumb" src="[^"]+" alt="([^"]+)"', m),
                            "text": re.search(r'<span class="dup-text">(.*?)</span>', m, re.S).group(1)})
        more = re.search(r'class="dup-more">and <b>(\d+)</b> more', g)
        out.append({"kept": int(re.search(r'data-kept="(\d+)"', g).group(1)),
                    "size": int(re.search(r'data-size="(\d+)"', g).group(1)),
                    "members": members, "more": int(more.group(1)) if more else 0})
    return out


def test_image_and_text_duplicate_groups_are_counted_and_shown_kept_first_with_thumbnails(
        tmp_path, write_recipe, djx_cli):
    images = tmp_path / "images"
    # (picture seed, text): pictures 1 and 2 come three and two times; "same words" three times
    # among the samples left after the picture groups; "b" (#1) is too short for the length filter
    spec = [(1, "photo zero"), (2, "b"), (1, "photo two"), (3, "same words"), (1, "photo four"),
            (2, "photo five"), (4, "same words"), (5, "same words"), (6, "other words")]
    rows = [{"id": f"s{i}", "text": text, "images": [noise_image(images, f"{i}.png", seed)]}
            for i, (seed, text) in enumerate(spec)]
    printed, html, folder = run_and_analyze(
        tmp_path, rows, [{"image_deduplicator": {}}, {"document_deduplicator": {}}, {"text_length_filter": {"min_len": 3}}],
        write_recipe, djx_cli)

    assert "0. image_deduplicator: 2 groups, 3 samples removed" in printed
    assert "by size: 1 group of 3 samples, 1 group of 2 samples" in printed
    assert re.search(r"largest: 3 samples, kept #0 \(id 's0'\)\n +2 samples, kept #1 \(id 's1'\), "
                     r"itself dropped by a later op", printed)
    assert "1. document_deduplicator: 1 group, 2 samples removed" in printed
    assert "text_length_filter" not in printed.split("duplicate groups")[1].split("[djx]")[0]

    on_page = ops_on_page(html)
    assert list(on_page) == ["image_deduplicator", "document_deduplicator"]
    assert re.search(r'class="n-groups">2</b>.*class="n-removed">3</b>', on_page["image_deduplicator"], re.S)
    image_groups = groups_on_page(on_page["image_deduplicator"])
    assert [(g["kept"], g["size"]) for g in image_groups] == [(0, 3), (1, 2)]
    for g, positions in zip(image_groups, ([0, 2, 4], [1, 5])):
        assert [m["pos"] for m in g["members"]] == positions  # the kept sample first, then input order
        assert [m["role"] for m in g["members"]] == ["kept"] + ["duplicate"] * (len(positions) - 1)
        assert [m["images"] for m in g["members"]] == [[rows[p]["images"][0]] for p in positions]
        assert [m["text"] for m in g["members"]] == [rows[p]["text"] for p in positions]
        for m in g["members"]:
            (thumb,) = m["thumbs"]
            with Image.open(folder / thumb) as im:  # a thumbnail written beside the page, not the original
                assert im.format == "JPEG" and max(im.size) <= 128
    assert "dropped later by text_length_filter: text_len=1" in on_page["image_deduplicator"]  # kept #1 itself
    (text_group,) = groups_on_page(on_page["document_deduplicator"])
    assert [m["pos"] for m in text_group["members"]] == [3, 6, 7] and text_group["more"] == 0
    assert {m["text"] for m in text_group["members"]} == {"same words"}
    assert '<a href="#dedup-0">groups</a>' in html and 'id="dedup-0"' in html  # from the first screen


def test_a_group_member_whose_image_is_gone_or_is_a_fifo_shows_no_thumbnail_and_never_blocks(
        tmp_path, write_recipe, djx_cli):
    images = tmp_path / "images"
    rows = [{"id": i, "text": f"photo {i}", "images": [noise_image(images, f"{i}.png", 7)]} for i in range(3)]
    _, html, _ = run_and_analyze(tmp_path, rows, [{"image_deduplicator": {}}], write_recipe, djx_cli)
    assert [m["thumbs"] != [] for m in groups_on_page(ops_on_page(html)["image_deduplicator"])[0]["members"]] == [True] * 3
    (images / "1.png").unlink()
    (images / "2.png").unlink()
    os.mkfifo(images / "2.png")  # opened by name, it would wait for a writer forever
    again = djx_cli("analyze", tmp_path / "out" / "kept.jsonl")
    assert again.rc == 0, again.out + again.err
    html = (tmp_path / "out" / "kept.analysis" / "report.html").read_text(encoding="utf-8")
    (group,) = groups_on_page(ops_on_page(html)["image_deduplicator"])
    assert [(m["pos"], m["thumbs"] != []) for m in group["members"]] == [(0, True), (1, False), (2, False)]
    assert group["members"][2]["text"] == "photo 2"
    assert html.count("image not readable now") >= 2


def test_text_only_groups_render_texts_the_largest_first_and_say_what_is_not_shown(
        tmp_path, write_recipe, djx_cli):
    long_text = "a long caption that repeats itself " * 20
    texts = [long_text] * 7 + [f"pair {i}" for i in range(12) for _ in range(2)] + ["alone"]
    rows = [{"id": i, "text": t} for i, t in enumerate(texts)]
    printed, html, _ = run_and_analyze(tmp_path, rows, [{"document_deduplicator": {}}], write_recipe, djx_cli)

    assert "0. document_deduplicator: 13 groups, 18 samples removed" in printed
    assert "by size: 1 group of 7 samples, 12 groups of 2 samples" in printed
    assert printed.count(" samples, kept #") == 10  # the top 10 groups only

    part = ops_on_page(html)["document_deduplicator"]
    assert "<img" not in part
    groups = groups_on_page(part)
    assert [(g["kept"], g["size"]) for g in groups] == [(0, 7)] + [(7 + 2 * i, 2) for i in range(9)]
    big = groups[0]
    assert [m["pos"] for m in big["members"]] == [0, 1, 2, 3, 4] and big["more"] == 2  # "and 2 more"
    assert all(m["text"].endswith("…") and len(m["text"]) < len(long_text) for m in big["members"])
    assert [m["text"] for m in groups[1]["members"]] == ["pair 0", "pair 0"]
    assert "and 3 smaller groups" in part

    from djx.analyze import analyze  # the same, in Python
    (op,) = analyze(str(tmp_path / "out" / "kept.jsonl"), log=lambda *_: None).duplicates
    assert (op.op, op.groups, op.removed, op.sizes) == ("document_deduplicator", 13, 18, [(7, 1), (2, 12)])
    assert [d["pos"] for d in op.top[0].duplicates] == [1, 2, 3, 4] and op.top[0].more == 2


def test_a_run_without_deduplicators_shows_no_duplicate_groups(tmp_path, write_recipe, djx_cli):
    rows = [{"id": i, "text": t} for i, t in enumerate(["same text", "same text", "x", "other text"])]
    printed, html, _ = run_and_analyze(tmp_path, rows, [{"text_length_filter": {"min_len": 2}}], write_recipe, djx_cli)
    assert "duplicate" not in printed
    assert section(html) == "" and "dup-group" not in html


def test_a_deduplicator_that_found_nothing_says_so(tmp_path, write_recipe, djx_cli):
    rows = [{"id": i, "text": f"text number {i}"} for i in range(5)]
    printed, html, _ = run_and_analyze(tmp_path, rows, [{"document_deduplicator": {}}], write_recipe, djx_cli)
    assert "0. document_deduplicator: no duplicates" in printed
    part = ops_on_page(html)["document_deduplicator"]
    assert "No duplicates found." in part and "dup-group" not in part


def test_duplicates_not_written_are_not_taken_for_no_duplicates(tmp_path, write_recipe, djx_cli):
    rows = [{"id": i, "text": t} for i, t in enumerate(["same text", "other", "same text", "same text"])]
    printed, html, _ = run_and_analyze(tmp_path, rows, [{"document_deduplicator": {}}], write_recipe, djx_cli,
                                       export_dropped=False)
    assert "0. document_deduplicator: 2 duplicates removed are not in the dropped output" in printed
    assert "no duplicates" not in printed
    part = ops_on_page(html)["document_deduplicator"]
    assert "dup-unwritten" in part and "No duplicates found." not in part


def test_a_group_whose_kept_sample_a_later_op_rejected_shows_it_first_saying_so(tmp_path, write_recipe, djx_cli):
    images = tmp_path / "images"
    (tmp_path / "broken.jpg").write_bytes(b"\xff\xd8\xff\xe0 not a JPEG")
    rows = [{"id": "first", "text": "same caption", "images": [str(tmp_path / "broken.jpg")]}] + \
        [{"id": i, "text": "same caption", "images": [noise_image(images, f"{i}.png", i)]} for i in (1, 2)]
    printed, html, _ = run_and_analyze(tmp_path, rows, [{"document_deduplicator": {}}, {"image_shape_filter": {}}],
                                       write_recipe, djx_cli)
    assert "3 samples, kept #0 (id 'first'), itself rejected by a later op" in printed
    (group,) = groups_on_page(ops_on_page(html)["document_deduplicator"])
    assert [(m["pos"], m["role"]) for m in group["members"]] == [(0, "kept"), (1, "duplicate"), (2, "duplicate")]
    assert "rejected later by image_shape_filter" in ops_on_page(html)["document_deduplicator"]
