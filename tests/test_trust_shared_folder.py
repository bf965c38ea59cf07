"""Another user who may write in the export folder, or in a folder above it, must not be able to
change what a run writes there: swap its state folder mid-run for a link to the victim's files
(which the clean-up would delete) or to parts of their own (which the run would export), nor plant
a link as the export's folder that leads the outputs where they chose. A folder others may write is
refused unless it is sticky (as /tmp), where they cannot rename the run's folder; and a second run
on the same export is refused before it reads the first one's state, which that one may be moving
away. The other user is `nobody`, in a child process made with fork and setuid (root only)."""
from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from pathlib import Path

import pytest

from helpers import as_other_user

as_root = pytest.mark.skipif(os.getuid() != 0, reason="acting as another user needs root")
TEXTS = [f"sample number {i:04d} with words" for i in range(20)]
PRECIOUS = {"thesis.tex": "precious thesis\n", "o.jsonl": "PRECIOUS, not djx output\n"}


@pytest.fixture
def scene():
    """Under the temp folder (nobody must reach it; pytest's tmp_path is private): the victim's
    folder of precious files, and a scratch folder to be opened to others."""
    base = Path(tempfile.mkdtemp(prefix="djx-test-shared-"))
    base.chmod(0o755)
    (base / "precious").mkdir()
    for name, text in PRECIOUS.items():
        (base / "precious" / name).write_text(text)
    (base / "shared").mkdir()
    yield base
    shutil.rmtree(base, ignore_errors=True)


def untouched(folder: Path) -> bool:
    return {p.name: p.read_text() for p in folder.iterdir()} == PRECIOUS


def one_line_refusal(res) -> str:
    lines = [line for line in res.err.splitlines() if line.strip()]
    assert res.rc != 0 and "Traceback" not in res.err and len(lines) == 1, res.err
    return lines[0]


def keys(tmp_path: Path, export: Path) -> dict:
    (tmp_path / "d.jsonl").write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in enumerate(TEXTS)))
    return {"dataset_path": str(tmp_path / "d.jsonl"), "export_path": str(export), "np": 1, "start_method": "fork",
            "process": [{"text_length_filter": {"min_len": 5}}]}


@as_root
@pytest.mark.parametrize("mode", [0o777, 0o1777])
def test_the_state_folder_cannot_be_swapped_for_a_link_mid_run(tmp_path, scene, monkeypatch, mode):
    """D1: while the run works (at its checkpoint), nobody renames its state folder away and puts a
    link to the victim's folder in its place. A folder others may write without the sticky bit is
    refused before the run starts; in a sticky one the rename fails. The victim's files stay."""
    from djx import Pipeline
    from djx.core.errors import DjxError
    from djx.core.io.outputs import OutputWriter
    shared = scene / "shared"
    shared.chmod(mode)
    attacks = []
    real = OutputWriter.checkpoint

    def swap():
        os.rename(shared / ".o.djx-state", shared / ".moved")
        os.symlink(scene / "precious", shared / ".o.djx-state")

    def checkpoint_under_attack(self, *a, **kw):
        if not attacks:
            attacks.append(as_other_user(swap))
        return real(self, *a, **kw)
    monkeypatch.setattr(OutputWriter, "checkpoint", checkpoint_under_attack)
    pipeline = Pipeline(**keys(tmp_path, shared / "o.jsonl"))
    if mode == 0o777:
        with pytest.raises(DjxError, match=f"others may write in the folder {shared} .*mode 0777, no sticky bit"):
            pipeline.run(progress=False, log=lambda *a: None)
        assert attacks == [] and os.listdir(shared) == []
    else:
        summary = pipeline.run(progress=False, log=lambda *a: None)
        assert attacks and attacks[0] != 0  # sticky: nobody may not rename the victim's folder
        assert summary["check"]["ok"] and summary["kept"] == len(TEXTS)
        assert sorted(os.listdir(shared)) == ["o.dropped.jsonl", "o.jsonl", "o.rejected.jsonl", "o.summary.json"]
    assert untouched(scene / "precious")


@as_root
@pytest.mark.parametrize("mode", [0o777, 0o1777])
def test_a_link_another_user_planted_as_the_export_folder_is_not_followed(tmp_path, scene, djx_cli, write_recipe,
                                                                         write_jsonl, mode):
    """D2: nobody makes shared/out a link to the victim's folder; the victim exports to
    shared/out/o.jsonl (or converts, or analyzes, there): refused in one line, nothing written."""
    shared = scene / "shared"
    shared.chmod(mode)
    assert as_other_user(lambda: os.symlink(scene / "precious", shared / "out")) == 0
    recipe = write_recipe(tmp_path / "r.yaml", **keys(tmp_path, shared / "out" / "o.jsonl"))
    line = one_line_refusal(djx_cli("process", recipe))
    why = (f"{shared / 'out'} is a link .* that nobody made" if mode & 0o1000
           else f"others may write in the folder {shared} ")
    assert line.startswith("djx: error: export_path: ") and re.search(why, line), line
    llava = write_jsonl(tmp_path / "llava.jsonl", [{"id": "1", "conversations": [
        {"from": "human", "value": "what?"}, {"from": "gpt", "value": "a cat"}]}])
    line = one_line_refusal(djx_cli("convert", "llava-to-djx", llava, shared / "out" / "o.jsonl"))
    assert "convert: " in line and re.search(why, line), line
    assert untouched(scene / "precious")


@as_root
def test_a_folder_another_user_made_in_a_sticky_folder_is_refused(tmp_path, scene, djx_cli, write_recipe):
    """In /tmp anyone may make the folder the victim names first: theirs, so refused."""
    shared = scene / "shared"
    shared.chmod(0o1777)
    assert as_other_user(lambda: os.mkdir(shared / "out", 0o755)) == 0
    recipe = write_recipe(tmp_path / "r.yaml", **keys(tmp_path, shared / "out" / "o.jsonl"))
    line = one_line_refusal(djx_cli("process", recipe))
    assert f"the folder {shared / 'out'} (owner nobody, mode 0755) is another user's" in line
    assert os.listdir(shared / "out") == []


def test_a_second_run_is_refused_before_it_reads_the_state_the_first_is_moving_away(tmp_path, djx_cli, write_recipe):
    """D9: run A holds the export (it is finishing); run B must not read A's manifest and then
    open parts A has moved away: B is refused at once, in one line, and leaves nothing behind
    once A is done."""
    import fcntl

    from djx.core.io.outputs import OutputWriter
    k = keys(tmp_path, tmp_path / "out" / "o.jsonl")
    recipe = write_recipe(tmp_path / "r.yaml", **k)
    state = tmp_path / "out" / ".o.djx-state"
    state.mkdir(parents=True, mode=0o700)
    (state / "lock").touch()
    ready, go = os.pipe(), os.pipe()
    pid = os.fork()
    if pid == 0:  # run A: holds the lock until told to finish, then removes its state as a finish does
        with open(state / "lock", "w") as f:
            fcntl.lockf(f, fcntl.LOCK_EX)
            os.write(ready[1], b"1")
            os.read(go[0], 1)
            shutil.rmtree(state)
        os._exit(0)
    os.read(ready[0], 1)
    real, reads = OutputWriter.load_manifest, []

    def load_while_a_finishes(self):  # A finishes right after B read the manifest
        reads.append(real(self))
        os.write(go[1], b"1")
        os.waitpid(pid, 0)
        return reads[-1]
    OutputWriter.load_manifest = load_while_a_finishes
    try:
        line = one_line_refusal(djx_cli("process", recipe))
    finally:
        OutputWriter.load_manifest = real
        if not reads:
            os.write(go[1], b"1")
            os.waitpid(pid, 0)
    assert "another djx run is writing" in line and reads == []
    assert not state.exists()  # A removed its state; B left no lock behind
    assert djx_cli("process", recipe).rc == 0
