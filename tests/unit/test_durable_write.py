"""write_durable on a disk that fills up: the old content stays, and no temporary file is left
beside it (a full disk used to leave an empty `.manifest.json.<random>.tmp` per failed write)."""
from __future__ import annotations

import errno
import json
import os

import pytest

from djx.core.io.durable import write_durable


def test_a_write_that_fails_keeps_the_old_content_and_leaves_no_temporary_file(tmp_path, monkeypatch):
    path = tmp_path / "manifest.json"
    write_durable(str(path), {"read": 1})

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OSError) as e:
        write_durable(str(path), {"read": 2})
    assert e.value.errno == errno.ENOSPC
    assert sorted(p.name for p in tmp_path.iterdir()) == ["manifest.json"]
    assert json.loads(path.read_text()) == {"read": 1}
