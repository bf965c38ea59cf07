"""A run killed between the moves of its finish, over an earlier run's outputs, leaves a mix of the
two beside its state folder's finishing mark: `djx check` and `djx analyze` say that a run was
stopped while finishing and to run it again (not that stats were edited), and the rerun completes
it to outputs that pass."""
from __future__ import annotations

import json
from pathlib import Path

import pytest


class Killed(BaseException):
    """The process dies here (as a kill -9 would: nothing after this point runs)."""


def run(tmp_path: Path, min_len: int) -> dict:
    from djx import Pipeline
    data = tmp_path / "d.jsonl"
    if not data.exists():
        data.write_text("".join(json.dumps({"id": i, "text": "x" * (i % 30)}) + "\n" for i in range(120)))
    return Pipeline(dataset_path=str(data), export_path=str(tmp_path / "out" / "o.jsonl"), np=1,
                    process=[{"text_length_filter": {"min_len": min_len}}]).run(progress=False, log=lambda *a: None)


def test_check_and_analyze_say_a_run_was_stopped_while_finishing(tmp_path, monkeypatch, djx_cli):
    from djx.core.io.outputs import OutputWriter
    assert run(tmp_path, 20)["check"]["ok"]  # an earlier run's outputs, with another threshold
    real = OutputWriter._materialize

    def first_move_only(self, kind, dest):
        if kind != "kept":
            raise Killed()
        real(self, kind, dest)
    monkeypatch.setattr(OutputWriter, "_materialize", first_move_only)
    with pytest.raises(Killed):
        run(tmp_path, 10)
    monkeypatch.undo()
    export = tmp_path / "out" / "o.jsonl"
    for command in ("check", "analyze"):
        res = djx_cli(command, export)
        assert res.rc == 1 and "a run was stopped while moving its outputs into place" in res.err, res.out + res.err
        assert "finishing mark" in res.err and "Run the same `djx process` command again" in res.err
        assert "other thresholds" not in res.out + res.err
    assert run(tmp_path, 10)["kept"] == 120 - sum(1 for i in range(120) if i % 30 < 10)  # completed, not redone
    assert djx_cli("check", export).rc == 0
