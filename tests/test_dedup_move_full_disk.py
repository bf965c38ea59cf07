"""A full disk after the dedup phase, while its new parts are recorded and moved into place, is said
in the one line of the streaming pass (no traceback), and the same command completes the move."""
from __future__ import annotations

import errno

import pytest

from test_dedup_stop_and_full_disk import outputs, run


def test_a_full_disk_while_moving_the_dedup_parts_is_said_in_one_line_and_the_rerun_completes(tmp_path,
                                                                                               monkeypatch):
    from djx.core.errors import DjxError
    from djx.core.io.outputs import OutputWriter
    run(tmp_path, "ref")

    def full(self):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(OutputWriter, "move_duplicates", full)
    with pytest.raises(DjxError, match=r"could not write the outputs in .*djx-state \(the disk is full\)"):
        run(tmp_path, "out")
    monkeypatch.undo()
    summary = run(tmp_path, "out")
    assert summary["resumed"] and summary["check"]["ok"]
    assert outputs(tmp_path / "out") == outputs(tmp_path / "ref")
