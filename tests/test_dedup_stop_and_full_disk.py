"""The dedup phase, between the streaming pass and the finish, stops as the streaming pass does:
a SIGTERM (the command line's installed Stop) ends it with Stopped, and a full disk with the one-line
DjxError that names the state folder; neither leaves its half-written parts, and the same command
then resumes to the outputs of a run never stopped."""
from __future__ import annotations

import errno
import json
import signal
from pathlib import Path

import pytest

KEYS = {"batch_size": 8, "np": 1, "start_method": "fork", "checkpoint_every": 2, "export_dropped": True,
        "process": [{"text_length_filter": {"min_len": 3}}, {"document_deduplicator": {"lowercase": True}}]}


def run(tmp_path: Path, folder: str, **kw) -> dict:
    from djx import Pipeline
    data = tmp_path / "data.jsonl"
    if not data.exists():
        data.write_text("".join(json.dumps({"id": i, "text": f"text number {i % 37} of the set"}) + "\n"
                                for i in range(200)))
    return Pipeline(dataset_path=str(data), **KEYS).run(export_path=str(tmp_path / folder / "o.jsonl"),
                                                        progress=False, log=lambda *a: None, **kw)


def outputs(folder: Path) -> list[bytes]:
    return [(folder / name).read_bytes() for name in ("o.jsonl", "o.dropped.jsonl", "o.rejected.jsonl")]


def state_files(folder: Path) -> set[str]:
    return {p.name for p in folder.glob(".*djx-state/*")}


def test_a_sigterm_in_the_dedup_phase_stops_the_run_and_the_rerun_gives_the_same_outputs(tmp_path, monkeypatch):
    import djx.core.run.ledger as ledger
    from djx.core.run.stop import RUN_SAVED, Stop, Stopped
    reference = run(tmp_path, "ref")
    assert reference["check"]["ok"] and reference["dropped"] > 0
    real = ledger.deduplicate
    stop = Stop()

    def term_then_dedup(*a, **kw):  # the SIGTERM handler, called as the signal would call it
        stop._on_term(signal.SIGTERM, None)
        return real(*a, **kw)
    monkeypatch.setattr(ledger, "deduplicate", term_then_dedup)
    stop.install()
    try:
        with pytest.raises(Stopped, match=f"terminated \\(SIGTERM\\); {RUN_SAVED}"):
            run(tmp_path, "out", stop=stop)
    finally:
        stop.uninstall()
    assert not (tmp_path / "out" / "o.jsonl").exists()
    assert not {"kept.dedup.jsonl.part", "dropped.dedup.jsonl.part"} & state_files(tmp_path / "out")
    monkeypatch.undo()
    summary = run(tmp_path, "out")
    assert summary["resumed"] and summary["check"]["ok"]
    assert outputs(tmp_path / "out") == outputs(tmp_path / "ref")


def test_a_full_disk_in_the_dedup_phase_is_said_in_one_line_and_the_rerun_resumes(tmp_path, monkeypatch):
    import djx.core.dedup.phase as phase
    from djx.core.errors import DjxError
    run(tmp_path, "ref")

    class Full:
        def __init__(self, f):
            self.f = f

        def write(self, data):
            raise OSError(errno.ENOSPC, "No space left on device")

        def __getattr__(self, name):
            return getattr(self.f, name)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

    def open_full(path, mode="r", *a, **kw):
        f = open(path, mode, *a, **kw)
        return Full(f) if "w" in mode and str(path).endswith(".dedup.jsonl.part") else f
    monkeypatch.setattr(phase, "open", open_full, raising=False)
    with pytest.raises(DjxError, match=r"could not write the outputs in .*djx-state \(the disk is full\); every "
                                       r"sample up to the last checkpoint is saved there .* run the same command "
                                       r"again to resume"):
        run(tmp_path, "out")
    assert not {"kept.dedup.jsonl.part", "dropped.dedup.jsonl.part"} & state_files(tmp_path / "out")
    monkeypatch.undo()
    summary = run(tmp_path, "out")
    assert summary["resumed"] and summary["check"]["ok"]
    assert outputs(tmp_path / "out") == outputs(tmp_path / "ref")
