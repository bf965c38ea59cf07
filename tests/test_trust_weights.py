"""The shared-weights folder lives where every local user can write (/dev/shm): another user must
not be able to choose the folder djx uses, or plant a skeleton that djx unpickles (code run as you)."""
from __future__ import annotations

import os
import pickle
import shutil
import stat
import tempfile

import pytest

from djx.core.errors import DjxError
from djx.core.models.share.folder import create_run_folder, private, remove_stale, share_root
from djx.core.models.share.split import spec_key
from djx.core.models.share.weight_share import WeightShare

from helpers import NOBODY, as_other_user

as_root = pytest.mark.skipif(os.getuid() != 0, reason="making a folder of another user needs root")


@pytest.fixture
def shm():
    """A folder like /dev/shm: everyone may create entries, only owners may rename or remove them
    (in the temp folder, not under pytest's private tmp_path, so that another user can reach it)."""
    base = tempfile.mkdtemp(prefix="djx-test-shm-")
    os.chmod(base, 0o1777)
    yield base
    shutil.rmtree(base, ignore_errors=True)


@as_root
def test_a_root_another_user_made_first_is_not_used(shm):
    root = share_root(shm)

    def squat():  # the attacker makes the root djx would use, open to everyone
        os.mkdir(root, 0o777)
        os.chmod(root, 0o777)
    assert as_other_user(squat) == 0 and os.stat(root).st_uid == NOBODY
    folder = create_run_folder(shm)
    assert not folder.startswith(share_root(shm) + os.sep)
    assert os.path.dirname(folder) == shm and private(folder)


@pytest.mark.parametrize("attack", ["loose mode", "symlink"])
def test_a_root_anyone_could_enter_is_not_used(shm, tmp_path, attack):
    root = share_root(shm)
    if attack == "loose mode":
        os.mkdir(root)
        os.chmod(root, 0o777)  # anyone could rename a run folder away and put their own in its place
    else:
        elsewhere = tmp_path / "attackers"
        elsewhere.mkdir(mode=0o700)
        os.symlink(elsewhere, root)
    folder = create_run_folder(shm)
    assert os.path.dirname(folder) == shm and private(folder)
    assert os.listdir(tmp_path / "attackers") == [] if attack == "symlink" else True


def test_a_private_root_is_used_and_stale_folders_beside_it_are_cleaned(shm):
    folder = create_run_folder(shm)
    assert os.path.dirname(folder) == share_root(shm)
    st = os.lstat(share_root(shm))
    assert stat.S_IMODE(st.st_mode) == 0o700 and st.st_uid == os.getuid()
    # a fallback folder of a dead run (pid 0 never runs djx) is removed by the next run
    dead = os.path.join(shm, f"djx-weights-{os.getuid()}-run-999999999-1-abc")
    os.mkdir(dead, 0o700)
    assert remove_stale(shm) == [dead] and not os.path.exists(dead)


class Planted:
    """What an attacker pickles: unpickling it runs code (here: writes a file)."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_a_skeleton_this_run_did_not_write_is_refused_unread(tmp_path):
    folder = tmp_path / "run"
    folder.mkdir(mode=0o700)
    share, spec = WeightShare(folder=str(folder)), ("tiny", 1)
    key = spec_key(spec, "cpu")
    marker = tmp_path / "code-ran"
    (folder / f"{key}.skeleton").write_bytes(b"\0" * 32 + pickle.dumps(Planted(str(marker))))
    (folder / f"{key}.pt").write_bytes(b"")
    with pytest.raises(DjxError, match="not written by this run"):
        share.load(lambda s, d: pytest.fail("the loader is not called: the skeleton exists"), spec, "cpu")
    assert not marker.exists()


def test_a_skeleton_signed_by_another_run_is_refused(tmp_path):
    import torch
    folder = tmp_path / "run"
    folder.mkdir(mode=0o700)
    spec = ("linear", 1)
    writer = WeightShare(folder=str(folder))
    model = writer.load(lambda s, d: torch.nn.Linear(64, 64), spec, "cpu")
    assert model.weight.shape == (64, 64)
    assert WeightShare(folder=str(folder), secret=writer.secret).load(None, spec, "cpu").weight.equal(model.weight)
    with pytest.raises(DjxError, match="not written by this run"):
        WeightShare(folder=str(folder)).load(None, spec, "cpu")  # another run's key


def test_a_folder_others_can_write_is_refused(tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    folder.chmod(0o777)
    with pytest.raises(DjxError, match="not a private folder"):
        WeightShare(folder=str(folder)).load(lambda s, d: None, ("m", 1), "cpu")
