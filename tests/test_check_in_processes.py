"""check_outputs reading JSON Lines outputs in pieces in several processes finds what one reader
finds: the same counts, the same problems with the same numbers of samples and positions (stats
missing or impossible, verdicts that do not hold, a sample in two pieces, samples in none, a
rejected record without a reason), the same signature note; a damaged line, which a piece cannot
place, is reported by the one reader's message with its line number."""
from __future__ import annotations

import json
import random

import pytest

from djx import build_op
from djx.core.errors import CheckError
from djx.core.run.check import check_outputs

POS, STATS, DROP = "__dj__pos__", "__dj__stats__", "__dj__drop__"
N = 3000


def planted(tmp_path) -> tuple[str, str, str]:
    """N input positions through two text_length_filters (min_len 5, then max_len 40), with every
    kind of problem planted at random places of the files."""
    rng = random.Random(11)
    kept, dropped, rejected = [], [], []
    for pos in range(N):
        n = rng.randint(0, 60)
        rec = {"text": "x" * n, POS: pos, STATS: {"text_len": n}}
        if pos % 97 == 0:
            rejected.append({POS: pos, "reason": "" if pos % 2 else "read error", "code": "read"})
        elif n < 5:
            dropped.append({**rec, DROP: {"op": "text_length_filter", "op_index": 0, "reason": "short"}})
        elif n > 40:
            dropped.append({**rec, DROP: {"op": "text_length_filter", "op_index": 1, "reason": "long"}})
        else:
            kept.append(rec)
    for i in rng.sample(range(len(kept)), 25):
        kept[i][STATS]["text_len"] = rng.choice([-3, float("nan"), 100, "many"])  # impossible, or failing
    for i in rng.sample(range(len(kept)), 7):
        del kept[i][STATS]["text_len"]
    dropped[3][DROP]["op_index"] = 1  # names the max_len filter, which passes it
    for i in rng.sample(range(len(kept)), 12):  # in another piece of the same file, or of the dropped file
        kept.append(dict(kept[i]))
        dropped.append(dict(kept[i], **{DROP: {"op": "text_length_filter", "op_index": 0, "reason": "r"}}))
    del kept[100:130]  # in no file
    rng.shuffle(kept)
    paths = []
    for name, recs in (("o.jsonl", kept), ("o.dropped.jsonl", dropped), ("o.rejected.jsonl", rejected)):
        (tmp_path / name).write_text("".join(json.dumps(r) + "\n" for r in recs))
        paths.append(str(tmp_path / name))
    return tuple(paths)


def checked(paths, workers: int, piece_bytes: int = 4096, **kw):
    ops = [build_op("text_length_filter", {"min_len": 5}), build_op("text_length_filter", {"min_len": 0, "max_len": 40})]
    filters = [(op.name, tuple(op.stats_keys)) for op in ops]
    return check_outputs(*paths, filters, input_count=N, ops=ops, workers=workers, piece_bytes=piece_bytes, **kw)


def same(one, many) -> None:
    a, b = one.to_dict(), many.to_dict()
    assert a["counts"] == b["counts"] and a["ok"] == b["ok"] and a["notes"] == b["notes"]
    assert a["problems"].keys() == b["problems"].keys()
    for what, found in a["problems"].items():
        assert b["problems"][what]["samples"] == found["samples"], what
        if found["samples"] <= 10:  # all named: the same positions, in whatever order the pieces give
            assert sorted(b["problems"][what]["positions"]) == sorted(found["positions"]), what


def test_a_check_in_processes_finds_what_one_reader_finds(tmp_path):
    paths = planted(tmp_path)
    one = checked(paths, 1)
    assert not one.ok
    problems = one.to_dict()["problems"]
    assert problems["sample appears more than once across the outputs"]["samples"] == 24
    assert problems["input sample missing from every output"]["samples"] == 30
    assert problems["rejected record without a reason"]["samples"] == 15
    assert len(problems) >= 7
    assert one.readers == 1
    for workers in (2, 5):
        many = checked(paths, workers)
        assert many.readers == workers  # read in pieces, each in its own process
        same(one, many)
    key = b"k" * 32  # djx check's signatures: the note names the samples this key does not vouch for
    assert checked(paths, 1, verify_key=key).notes and checked(paths, 4, verify_key=key).notes \
        == checked(paths, 1, verify_key=key).notes


def test_sound_outputs_pass_in_processes_as_in_one(tmp_path):
    kept = tmp_path / "o.jsonl"
    kept.write_text("".join(json.dumps({"text": "x" * 9, POS: p, STATS: {"text_len": 9}}) + "\n" for p in range(N)))
    paths = (str(kept), None, None)
    assert checked(paths, 1).ok and checked(paths, 3).ok
    one, many = checked(paths, 1).to_dict(), checked(paths, 3).to_dict()
    assert many.pop("readers") == 3 and one.pop("readers") == 1 and many == one
    assert checked(paths, 3, piece_bytes=1 << 30).readers == 1  # outputs too small to cut: one reader


def test_a_damaged_line_is_reported_with_its_line_number_as_by_one_reader(tmp_path):
    paths = planted(tmp_path)
    lines = open(paths[0]).read().splitlines(keepends=True)
    lines[1500] = lines[1500][:40] + "\n"  # cut mid-record, in a piece that does not start the file
    open(paths[0], "w").write("".join(lines))
    with pytest.raises(CheckError) as one:
        checked(paths, 1)
    with pytest.raises(CheckError) as many:
        checked(paths, 4)
    assert str(many.value) == str(one.value) and "line 1501" in str(one.value)


def _check_in_a_daemon(paths, answer) -> None:
    report = checked(paths, 3)
    answer.send((report.ok, report.readers, report.counts))


def test_a_check_inside_a_daemonic_process_which_may_not_fork_reads_in_one(tmp_path):
    """Pipeline.run called from a user's daemonic worker process, which may have no children."""
    import multiprocess as mp
    kept = tmp_path / "o.jsonl"
    kept.write_text("".join(json.dumps({"text": "x" * 9, POS: p, STATS: {"text_len": 9}}) + "\n" for p in range(N)))
    ctx = mp.get_context("fork")
    mine, theirs = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_check_in_a_daemon, args=((str(kept), None, None), theirs), daemon=True)
    proc.start()
    theirs.close()  # the daemon's end: a daemon that fails leaves no writer, and recv() says so
    ok, readers, counts = mine.recv()
    proc.join()
    assert ok and readers == 1 and counts["kept"] == N
