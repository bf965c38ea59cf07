"""A FIFO or a dangling symbolic link in a folder or glob dataset is refused in one line naming it,
before any work, as a single dataset_path is: never a hang on open() or a traceback (audit D6, D7)."""
from __future__ import annotations

import os

import pytest

from djx.core.errors import DjxError
from djx.core.io.dataset import dataset_files


@pytest.mark.parametrize("as_glob", [False, True])
def test_a_fifo_in_a_folder_or_glob_dataset_is_refused_naming_it(tmp_path, as_glob):
    ds = tmp_path / "ds"
    ds.mkdir()
    (ds / "a.jsonl").write_text('{"text": "a"}\n')
    os.mkfifo(ds / "b.jsonl")
    with pytest.raises(DjxError, match=r"b\.jsonl is not a regular file \(a FIFO\)"):
        dataset_files(str(ds / "*.jsonl") if as_glob else str(ds))


def test_a_dangling_link_in_a_folder_dataset_is_refused_naming_it(tmp_path):
    ds = tmp_path / "ds"
    ds.mkdir()
    (ds / "a.jsonl").write_text('{"text": "a"}\n')
    os.symlink(tmp_path / "nowhere", ds / "gone.jsonl")
    with pytest.raises(DjxError, match=r"gone\.jsonl is a symbolic link to .*nowhere, which does not exist"):
        dataset_files(str(ds))
