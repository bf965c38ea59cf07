"""Folders djx writes into: made by this user, no one else's, wherever they are named from."""
import os
import stat

import pytest

from djx.core.errors import DjxError
from djx.core.io.private_files import own_folder, private_folder


def test_a_bare_folder_name_is_made_in_the_working_directory(tmp_path, monkeypatch):
    """`djx analyze o.jsonl --out a` names its folder without a parent: it is made where djx runs."""
    monkeypatch.chdir(tmp_path)
    assert own_folder("a", "analysis folder") == "a" and (tmp_path / "a").is_dir()
    private_folder("state")
    assert stat.S_IMODE(os.stat(tmp_path / "state").st_mode) == 0o700


def test_a_folder_others_may_write_or_a_link_is_refused(tmp_path):
    open_to_all = tmp_path / "shared"
    open_to_all.mkdir()
    open_to_all.chmod(0o777)
    with pytest.raises(DjxError, match="others may write in it"):
        own_folder(str(open_to_all), "analysis folder")
    (tmp_path / "link").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    with pytest.raises(DjxError, match="it is a symlink"):
        own_folder(str(tmp_path / "link"), "analysis folder")
