"""The export folder is not trusted by its names: another user who can add entries there (/tmp, or
a sticky team folder: a folder others may write without the sticky bit is refused outright,
test_trust_shared_folder.py) must not make a run write through links they planted, nor resume or
complete into records they wrote. A state folder is used only when this user made it and no one else can enter
it; temporary files get fresh random names; a resume state is used only when this user's key
signed its manifest and its parts still match the digests the manifest holds.

Tests run as root here: "another user" is a folder chowned to another uid, or a symlink."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

ATTACKER = 12345
TEXTS = [f"sample number {i:04d} with words" for i in range(20)]


@pytest.fixture
def victim(tmp_path, write_jsonl, write_recipe):
    """The victim's input, a notes file they care about, and a recipe exporting to out/o.jsonl."""
    data = write_jsonl(tmp_path / "d.jsonl", [{"id": i, "text": t} for i, t in enumerate(TEXTS)])
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes, not to be lost\n")
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path=str(data), export_path="out/o.jsonl", np=1,
                          process=[{"text_length_filter": {"min_len": 5}}])
    (tmp_path / "out").mkdir()
    return data, notes, recipe


def contents(*paths: Path) -> list[bytes]:
    return [p.read_bytes() for p in paths]


def one_line_refusal(res) -> str:
    lines = [line for line in res.err.splitlines() if line.strip()]
    assert res.rc != 0 and "Traceback" not in res.err and len(lines) == 1, res.err
    return lines[0]


def plant_links(folder: Path, data: Path, notes: Path) -> None:
    """Part files and the lock, each a link to one of the victim's files."""
    (folder / "kept.jsonl.part").symlink_to(data)
    (folder / "dropped.jsonl.part").symlink_to(notes)
    (folder / "rejected.jsonl.part").symlink_to(notes)
    (folder / "lock").symlink_to(notes)


@pytest.mark.parametrize("how", ["owned by another user", "a symlink"])
def test_a_state_folder_planted_by_another_user_is_refused(tmp_path, victim, djx_cli, how):
    data, notes, recipe = victim
    before = contents(data, notes)
    state = tmp_path / "out" / ".o.djx-state"
    if how == "a symlink":
        theirs = tmp_path / "theirs"
        theirs.mkdir()
        plant_links(theirs, data, notes)
        state.symlink_to(theirs)
    else:
        state.mkdir()
        plant_links(state, data, notes)
        os.chmod(state, 0o777)
        for p in [state, *state.iterdir()]:
            os.lchown(p, ATTACKER, ATTACKER)
    for extra in ([], ["--restart"]):
        line = one_line_refusal(djx_cli("process", recipe, *extra))
        assert str(state) in line and "not a private folder of this user" in line
        assert contents(data, notes) == before
    assert not (tmp_path / "out" / "o.jsonl").exists()


@pytest.mark.parametrize("fmt", [".json", ".parquet"])
def test_planted_tmp_links_beside_the_export_are_not_written_through(tmp_path, victim, write_recipe, djx_cli, fmt):
    data, notes, _ = victim
    before = contents(data, notes)
    recipe = write_recipe(tmp_path / "r2.yaml", dataset_path=str(data), export_path=f"out/o{fmt}", np=1,
                          keep_stats_in_res_ds=False, process=[{"text_length_filter": {"min_len": 5}}])
    for name in (f"o{fmt}", f"o.dropped{fmt}", f"o.rejected{fmt}", "o_stats.jsonl"):
        (tmp_path / "out" / (name + ".tmp")).symlink_to(notes)
    res = djx_cli("process", recipe)
    assert res.rc == 0, res.err
    assert contents(data, notes) == before
    export = tmp_path / "out" / f"o{fmt}"
    assert not export.is_symlink() and export.stat().st_size > 0
    from djx.core.io.output_reader import iter_output
    assert len(list(iter_output(str(export)))) == len(TEXTS)


def test_convert_does_not_write_through_planted_links(tmp_path, write_jsonl, djx_cli):
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes, not to be lost\n")
    good = {"id": "1", "image": "a.jpg", "conversations": [{"from": "human", "value": "<image>\nwhat?"},
                                                           {"from": "gpt", "value": "a cat"}]}
    src = write_jsonl(tmp_path / "llava.jsonl", [good, {"id": "2", "no": "conversations"}])
    (tmp_path / "djx.jsonl.part").symlink_to(notes)
    (tmp_path / "djx.rejected.jsonl").symlink_to(notes)
    res = djx_cli("convert", "llava-to-djx", src, tmp_path / "djx.jsonl", "--round-trip")
    assert res.rc == 1  # one record rejected, said with its reason
    assert notes.read_text() == "my notes, not to be lost\n"
    assert not (tmp_path / "djx.rejected.jsonl").is_symlink()
    assert len((tmp_path / "djx.rejected.jsonl").read_text().splitlines()) == 1
    assert len((tmp_path / "djx.jsonl").read_text().splitlines()) == 1


# -- resume states djx did not sign ------------------------------------------------------------------

def unfinished_state(tmp_path: Path) -> tuple[dict, Path]:
    """A genuine unfinished run of 60 samples, stopped by a bad line after 48 were saved; the
    keys to run it again with, and its state folder."""
    from djx import Pipeline
    from djx.core.records import FailFast
    lines = [json.dumps({"id": i, "text": f"sample number {i:04d}"}) for i in range(60)]
    lines[52] = '{"id": 52, "text": '
    (tmp_path / "data.jsonl").write_text("\n".join(lines) + "\n")
    keys = {"dataset_path": str(tmp_path / "data.jsonl"), "export_path": str(tmp_path / "out/o.jsonl"),
            "batch_size": 8, "np": 1, "start_method": "fork", "checkpoint_every": 100,
            "process": [{"text_length_filter": {"min_len": 5}}]}
    with pytest.raises(FailFast):
        Pipeline(**keys, on_error="fail").run(progress=False, log=lambda *a: None)
    state = tmp_path / "out" / ".o.djx-state"
    assert json.loads((state / "manifest.json").read_text())["read"]["records"] == 48
    return keys, state


def attacker_records(n: int) -> bytes:
    return b"".join(json.dumps({"id": 1000 + i, "text": f"attacker record {i}", "__dj__stats__": {"text_len": 17},
                                "__dj__pos__": i}).encode() + b"\n" for i in range(n))


def test_a_forged_finishing_state_is_not_completed(tmp_path):
    """Someone writes a state that says the run finished (the fingerprint is computable from the
    recipe and the input): the run must not move their records into place as its export."""
    from djx import Pipeline
    from djx.core.errors import ResumeError
    keys, state = unfinished_state(tmp_path)
    manifest = json.loads((state / "manifest.json").read_text())
    part = attacker_records(96)
    (state / "kept.jsonl.part").write_bytes(part)
    (state / "summary.json").write_text(json.dumps({"input": 120, "kept": 96, "check": {"ok": True}}))
    manifest.update(finishing=True, lengths={"kept": len(part), "dropped": 0, "rejected": 0},
                    read={**manifest["read"], "records": 120})
    (state / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ResumeError, match="not signed with this user's key"):
        Pipeline(**{k: v for k, v in keys.items()}).run(progress=False, log=lambda *a: None)
    assert not (tmp_path / "out" / "o.jsonl").exists()
    summary = Pipeline(**keys).run(restart=True, progress=False, log=lambda *a: None)
    assert summary["input"] == 60 and summary["kept"] == 59  # the bad line rejected, nothing of theirs


def test_a_forged_resume_point_is_refused_in_one_line(tmp_path, djx_cli, write_recipe):
    keys, state = unfinished_state(tmp_path)
    manifest = json.loads((state / "manifest.json").read_text())
    manifest.pop("sig", None)  # whatever the signature, it is not one over this content
    manifest["counts"]["kept"] = 96
    (state / "manifest.json").write_text(json.dumps(manifest))
    recipe = write_recipe(tmp_path / "r.yaml", **keys)
    line = one_line_refusal(djx_cli("process", recipe))
    assert "manifest.json" in line and "--restart" in line


def test_a_part_file_changed_after_its_checkpoint_is_refused(tmp_path):
    from djx import Pipeline
    from djx.core.errors import ResumeError
    keys, state = unfinished_state(tmp_path)
    part = state / "kept.jsonl.part"
    saved = part.read_bytes()
    part.write_bytes(saved.replace(b"sample number 0003", b"attacker text 0003"))
    assert len(part.read_bytes()) == len(saved)
    with pytest.raises(ResumeError, match="kept.jsonl.part"):
        Pipeline(**keys).run(progress=False, log=lambda *a: None)
    part.write_bytes(saved)  # as djx left it: the resume goes on
    summary = Pipeline(**keys).run(progress=False, log=lambda *a: None)
    assert summary["resumed"] and summary["input"] == 60 and summary["check"]["ok"]


def test_without_a_usable_key_no_run_resumes_and_the_refusal_names_the_key(tmp_path, monkeypatch):
    from djx import Pipeline
    from djx.core.errors import ResumeError
    home = tmp_path / "home"
    (home / "djx").mkdir(parents=True)
    os.chmod(home / "djx", 0o755)  # others may enter the key's folder: no key is used
    monkeypatch.setenv("XDG_DATA_HOME", str(home))
    keys, _ = unfinished_state(tmp_path)
    with pytest.raises(ResumeError, match=f"{home / 'djx'} has mode 0755"):
        Pipeline(**keys).run(progress=False, log=lambda *a: None)


# -- a forged __dj__llava__ in a djx-format input -------------------------------------------------

def test_a_forged_llava_key_in_a_djx_input_is_dropped(tmp_path, write_jsonl, read_jsonl, write_recipe, djx_cli):
    from djx.core.io.llava import LLAVA_KEY, _fingerprint
    text = "[[human]]: hello there\n[[gpt]]: a text-only answer <|__dj__eoc|>"
    hidden = {"text": _fingerprint(text), "orig": {
        "image": "nsfw.jpg", "planted": "extra",
        "conversations": [{"from": "human", "value": "<image>\nhidden question"},
                          {"from": "gpt", "value": "hidden answer"}]}}
    data = write_jsonl(tmp_path / "d.jsonl", [{"id": "1", "text": text, "images": [], LLAVA_KEY: hidden}])
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path=str(data), export_path="out/o.jsonl", np=1,
                          process=[{"text_length_filter": {"min_len": 5}}])
    res = djx_cli("process", recipe)
    assert res.rc == 0, res.err
    [kept] = read_jsonl(tmp_path / "out" / "o.jsonl")
    assert LLAVA_KEY not in kept
    assert json.loads((tmp_path / "out" / "o.summary.json").read_text())["events"]["foreign_llava_dropped"] == 1
    for src in (tmp_path / "out" / "o.jsonl", data):  # the run's export, or the forged file itself
        out = tmp_path / f"llava-{src.stem}.json"
        assert djx_cli("convert", "djx-to-llava", src, out).rc == 0
        [record] = json.loads(out.read_text())
        assert "image" not in record and "planted" not in record
        assert record["conversations"] == [{"from": "human", "value": "hello there"},
                                           {"from": "gpt", "value": "a text-only answer"}]


def test_llava_keys_djx_wrote_still_round_trip(tmp_path, write_jsonl, djx_cli):
    record = {"id": 7, "image": "a.jpg", "conversations": [{"from": "human", "value": "<image>\n what? "},
                                                           {"from": "gpt", "value": "a cat"}]}
    src = write_jsonl(tmp_path / "llava.jsonl", [record])
    assert djx_cli("convert", "llava-to-djx", src, tmp_path / "djx.jsonl", "--round-trip").rc == 0
    assert djx_cli("convert", "djx-to-llava", tmp_path / "djx.jsonl", tmp_path / "back.jsonl").rc == 0
    assert json.loads((tmp_path / "back.jsonl").read_text()) == record


def test_a_llava_field_a_run_wrote_survives_a_djx_rerun_and_converts_back(tmp_path, write_jsonl, read_jsonl,
                                                                         write_recipe, djx_cli):
    """The field djx writes (a LLaVA input exported in djx's format) is signed: a later djx-format
    run keeps it, and `djx convert djx-to-llava` gives the record back as it was read."""
    from djx.core.io.llava import LLAVA_KEY
    record = {"id": 7, "conversations": [{"from": "human", "value": " hello? "},
                                         {"from": "gpt", "value": "a text-only answer"}]}
    data = write_jsonl(tmp_path / "llava.jsonl", [record])
    first = write_recipe(tmp_path / "r1.yaml", dataset_path=str(data), export_path="one/o.jsonl", np=1,
                         dataset_format="llava", format_options={"export": "djx"},
                         process=[{"text_length_filter": {"min_len": 5}}])
    assert djx_cli("process", first).rc == 0
    assert LLAVA_KEY in read_jsonl(tmp_path / "one" / "o.jsonl")[0]
    again = write_recipe(tmp_path / "r2.yaml", dataset_path=str(tmp_path / "one" / "o.jsonl"),
                         export_path="two/o.jsonl", np=1, process=[{"text_length_filter": {"min_len": 5}}])
    assert djx_cli("process", again).rc == 0
    summary = json.loads((tmp_path / "two" / "o.summary.json").read_text())
    assert "foreign_llava_dropped" not in summary["events"]
    assert djx_cli("convert", "djx-to-llava", tmp_path / "two" / "o.jsonl", tmp_path / "back.jsonl").rc == 0
    back = json.loads((tmp_path / "back.jsonl").read_text())
    assert {k: back[k] for k in record} == record


# -- images vouched for by what their owner cannot set back --------------------------------------

def test_an_image_swapped_with_the_same_size_and_mtime_is_measured_again(tmp_path, make_image, write_jsonl,
                                                                          read_jsonl, write_recipe, djx_cli):
    big, other = make_image("big.png", (200, 200)), make_image("other.png", (200, 200), "blue")
    data = write_jsonl(tmp_path / "d.jsonl", [{"text": "one", "images": [str(big)]},
                                              {"text": "two", "images": [str(other)]}])
    shape = [{"image_shape_filter": {"min_width": 100}}]
    first = write_recipe(tmp_path / "r1.yaml", dataset_path=str(data), export_path="one/o.jsonl", np=1, process=shape)
    assert djx_cli("process", first).rc == 0
    st = big.stat()
    small = make_image("small.png", (16, 16)).read_bytes()
    assert len(small) < st.st_size
    with open(big, "r+b") as f:  # the same file (inode), same byte size, mtime set back
        f.write(small + b"\0" * (st.st_size - len(small)))
    os.utime(big, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert (big.stat().st_size, big.stat().st_mtime_ns) == (st.st_size, st.st_mtime_ns)
    again = write_recipe(tmp_path / "r2.yaml", dataset_path=str(tmp_path / "one/o.jsonl"), export_path="two/o.jsonl",
                         np=1, process=shape)
    res = djx_cli("process", again)
    assert res.rc == 0, res.err
    summary = json.loads((tmp_path / "two" / "o.summary.json").read_text())
    assert summary["ops"][0]["reused_stats"] == 1  # the untouched image's stats are still reused
    assert [s["text"] for s in read_jsonl(tmp_path / "two" / "o.jsonl")] == ["two"]


# -- an unusable key is named ---------------------------------------------------------------------

def test_an_unusable_stats_key_is_named_with_why(tmp_path, monkeypatch, write_jsonl, write_recipe, djx_cli):
    home = tmp_path / "home"
    (home / "djx").mkdir(parents=True, mode=0o700)
    key = home / "djx" / "stats.key"
    key.write_bytes(os.urandom(32))
    os.chmod(key, 0o644)
    monkeypatch.setenv("XDG_DATA_HOME", str(home))
    data = write_jsonl(tmp_path / "d.jsonl", [{"text": "a text long enough", "__dj__stats__": {"text_len": 3}}])
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path=str(data), export_path="out/o.jsonl", np=1,
                          process=[{"text_length_filter": {"min_len": 5}}])
    res = djx_cli("process", recipe)
    assert res.rc == 0, res.err
    assert str(key) in res.out and "others may read it" in res.out


def test_a_planted_ray_log_link_is_not_appended_through(tmp_path):
    """A Ray run's log goes to <stem>.ray.log beside the export: a link planted there is refused,
    never appended to (a ~/.bashrc behind it would run what the log says)."""
    from djx.core.errors import DjxError
    from djx.core.executors.ray.ray_log import RayLog
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes, not to be lost\n")
    (tmp_path / "o.ray.log").symlink_to(notes)
    with pytest.raises(DjxError, match="is a symlink"):
        with RayLog(str(tmp_path / "o.ray.log")):
            print("a line Ray would log")
    assert notes.read_text() == "my notes, not to be lost\n"


def test_a_planted_analysis_folder_is_refused(tmp_path, victim, djx_cli):
    """`djx analyze` writes <stem>.analysis/ beside the export by fixed names (report.html,
    stats.csv): one that another user made, holding links to the victim's files, is refused."""
    data, notes, recipe = victim
    assert djx_cli("process", recipe).rc == 0
    before = contents(data, notes)
    planted = tmp_path / "out" / "o.analysis"
    planted.mkdir()
    for name in ("report.html", "stats.csv"):
        (planted / name).symlink_to(notes)
    os.chmod(planted, 0o777)
    if os.getuid() == 0:
        os.lchown(planted, ATTACKER, ATTACKER)
    line = one_line_refusal(djx_cli("analyze", tmp_path / "out" / "o.jsonl"))
    assert str(planted) in line and "not a private folder of this user" in line
    assert contents(data, notes) == before
    os.chown(planted, os.getuid(), os.getgid())  # the victim's own folder, as djx makes it: used
    os.chmod(planted, 0o755)
    for name in ("report.html", "stats.csv"):
        (planted / name).unlink()
    assert djx_cli("analyze", tmp_path / "out" / "o.jsonl").rc == 0
    assert (planted / "report.html").is_file()


def test_a_killed_finish_leaves_no_temporary_files_behind_the_next_one(tmp_path, victim, write_recipe, djx_cli):
    """Temporary names are random, so the next finish removes those a killed one left: this
    user's files only, never another user's nor through a link."""
    data, notes, _ = victim
    recipe = write_recipe(tmp_path / "r2.yaml", dataset_path=str(data), export_path="out/o.json", np=1,
                          process=[{"text_length_filter": {"min_len": 5}}])
    out = tmp_path / "out"
    (out / ".o.json.0123456789ab.tmp").write_text("a killed finish's")
    theirs = out / ".o.json.ba9876543210.tmp"
    theirs.write_text("another user's")
    os.chown(theirs, ATTACKER, ATTACKER)
    (out / ".o.json.aaaaaaaaaaaa.tmp").symlink_to(notes)
    assert djx_cli("process", recipe).rc == 0
    left = sorted(p.name for p in out.glob(".o.json.*.tmp"))
    assert left == [".o.json.aaaaaaaaaaaa.tmp", ".o.json.ba9876543210.tmp"]
    assert notes.read_text() == "my notes, not to be lost\n"
