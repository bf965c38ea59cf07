"""The lock that holds an export for one run: taken once, counted only on the lock file that is
still there, and leaving no state folder behind a run that wrote nothing."""
from __future__ import annotations

import os
import shutil

from djx.core.io import export_lock


def test_the_lock_is_taken_once_and_a_folder_holding_only_it_is_removed_on_release(tmp_path):
    state = tmp_path / ".o.djx-state"
    lock = export_lock.ExportLock(str(state), str(tmp_path / "o.jsonl"))
    with lock:
        lock.acquire()  # held already: nothing changes
        assert sorted(os.listdir(state)) == ["lock"]
    assert not state.exists()  # a run stopped before it wrote anything leaves nothing behind
    with lock:
        (state / "manifest.json").write_text("{}")
    assert sorted(os.listdir(state)) == ["lock", "manifest.json"]  # a run's state stays


def test_a_lock_file_a_finishing_run_removed_meanwhile_does_not_count(tmp_path, monkeypatch):
    """The other run held the lock, finished and removed the state folder between this run's open
    of the lock file and its lock: the lock on that removed file holds nothing; a new one is taken."""
    state = tmp_path / ".o.djx-state"
    calls = []
    real = export_lock.fcntl.lockf

    def finish_meanwhile(f, how):
        calls.append(os.fstat(f.fileno()).st_ino)
        if len(calls) == 1:
            shutil.rmtree(state)
        return real(f, how)
    monkeypatch.setattr(export_lock.fcntl, "lockf", finish_meanwhile)
    lock = export_lock.ExportLock(str(state), str(tmp_path / "o.jsonl"))
    lock.acquire()
    assert len(calls) == 2 and os.stat(state / "lock").st_ino == calls[1]
    lock.release()
