"""A folder djx writes into: no other user may be able to change it or any folder above it (as
OpenSSH's StrictModes checks). Tests run as root here: "another user" is a uid a folder or link is
chowned to."""
from __future__ import annotations

import os

import pytest

from djx.core.errors import DjxError
from djx.core.io.folder_trust import check_folder_chain

NOBODY = 65534
as_root = pytest.mark.skipif(os.getuid() != 0, reason="giving a folder to another user needs root")


def test_a_folder_under_a_sticky_tmp_and_one_not_made_yet_are_accepted(tmp_path):
    check_folder_chain(str(tmp_path), "export_path")
    check_folder_chain(str(tmp_path / "not" / "made" / "yet"), "export_path")


def test_a_folder_others_may_write_without_the_sticky_bit_is_refused_wherever_it_is_on_the_way(tmp_path):
    shared = tmp_path / "shared"
    (shared / "mine").mkdir(parents=True)
    shared.chmod(0o777)
    for path in (shared, shared / "mine", shared / "mine" / "new"):
        with pytest.raises(DjxError, match=f"export_path: others may write in the folder {shared} "
                                           rf"\(owner \w+, mode 0777, no sticky bit\).*chmod go-w"):
            check_folder_chain(str(path), "export_path")
    shared.chmod(0o1777)  # as /tmp: others may add entries, never rename or remove this user's
    check_folder_chain(str(shared / "mine"), "export_path")


def test_a_link_of_this_user_is_followed_and_the_folders_it_leads_through_are_checked(tmp_path):
    loose = tmp_path / "loose"
    (loose / "deep").mkdir(parents=True)
    loose.chmod(0o777)
    (tmp_path / "link").symlink_to("loose/deep")
    with pytest.raises(DjxError, match=f"others may write in the folder {loose} "):
        check_folder_chain(str(tmp_path / "link" / "out"), "export_path")
    loose.chmod(0o755)
    check_folder_chain(str(tmp_path / "link" / "out"), "export_path")
    (tmp_path / "loop").symlink_to("loop")
    with pytest.raises(DjxError, match="too many links"):
        check_folder_chain(str(tmp_path / "loop" / "out"), "export_path")


@as_root
def test_a_folder_or_a_link_of_another_user_on_the_way_is_refused(tmp_path):
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o755)
    os.chown(theirs, NOBODY, NOBODY)
    with pytest.raises(DjxError, match=rf"the folder {theirs} \(owner nobody, mode 0755\) is another user's"):
        check_folder_chain(str(theirs / "out"), "export_path")
    mine = tmp_path / "mine"
    mine.mkdir()
    link = tmp_path / "out"
    link.symlink_to(mine)
    os.lchown(link, NOBODY, NOBODY)
    with pytest.raises(DjxError, match=f"export_path: {link} is a link \\(to {mine}\\) that nobody made"):
        check_folder_chain(str(link / "o.jsonl"), "export_path")


@as_root
def test_a_folder_only_this_users_own_group_may_write_is_accepted(tmp_path):
    """umask 002 makes folders group-writable: fine when the group is the user's own, no one else in it."""
    folder = tmp_path / "team"
    folder.mkdir()
    folder.chmod(0o775)
    os.chown(folder, 0, os.getgid())
    check_folder_chain(str(folder), "export_path")
    os.chown(folder, 0, NOBODY)
    with pytest.raises(DjxError, match="mode 0775, no sticky bit"):
        check_folder_chain(str(folder), "export_path")


def test_a_state_folder_under_a_folder_others_may_write_is_refused(tmp_path):
    from djx.core.io.private_files import private_folder
    (tmp_path / "out").mkdir()
    (tmp_path / "out").chmod(0o777)
    state = tmp_path / "out" / ".o.djx-state"
    with pytest.raises(DjxError, match=f"the state folder {state}: others may write in the folder"):
        private_folder(str(state))
    assert not state.exists()
