"""The export folder trusted by name: another user who can write it (/tmp, a team scratch folder)
plants the run's state folder, its temporary names or a whole resume state. djx must not write
through their links, resume or complete into their records, nor take a forged LLaVA field or an
image swapped under a signed stat; an unusable key must be named."""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import yaml

from .common import Case, djx, last_line, one_clear_line, write_jsonl

OTHER_UID = 12345  # "another user" when the red team runs as root


def _victim(tmp: Path, export: str = "out/o.jsonl", **keys) -> tuple[Path, Path, dict]:
    """The victim's input and notes, and a text recipe (returned so a case can change it)."""
    data = write_jsonl(tmp / "d.jsonl", [{"id": i, "text": f"sample number {i:04d}"} for i in range(20)])
    notes = tmp / "notes.txt"
    notes.write_text("my notes, not to be lost\n")
    recipe = {"dataset_path": "d.jsonl", "export_path": export, "np": 1,
              "process": [{"text_length_filter": {"min_len": 5}}], **keys}
    (tmp / "r.yaml").write_text(yaml.safe_dump(recipe))
    (tmp / "out").mkdir(exist_ok=True)
    return data, notes, recipe


def _untouched(*files: Path) -> dict:
    return {f: hashlib.sha256(f.read_bytes()).hexdigest() for f in files}


def _plant_links(folder: Path, data: Path, notes: Path) -> None:
    for name, target in (("kept.jsonl.part", data), ("dropped.jsonl.part", notes),
                         ("rejected.jsonl.part", notes), ("lock", notes)):
        (folder / name).symlink_to(target)


def _refused(tmp: Path, files: dict, proc) -> tuple[bool, str]:
    held = one_clear_line(proc) and _untouched(*files) == files and not (tmp / "out" / "o.jsonl").exists()
    return held, f"exit {proc.returncode}: {last_line(proc.stderr)}"


def planted_state_folder(tmp: Path) -> tuple[bool, str]:
    """.o.djx-state/ made by someone else (another owner, or mode 0777 when not root), parts linked to the victim's files."""
    data, notes, _ = _victim(tmp)
    files = _untouched(data, notes)
    state = tmp / "out" / ".o.djx-state"
    state.mkdir()
    _plant_links(state, data, notes)
    os.chmod(state, 0o777)
    if os.getuid() == 0:
        for p in [state, *state.iterdir()]:
            os.lchown(p, OTHER_UID, OTHER_UID)
    return _refused(tmp, files, djx("process", "r.yaml", "--quiet", cwd=tmp))


def planted_state_link(tmp: Path) -> tuple[bool, str]:
    """.o.djx-state is a symlink to a folder of links to the victim's files."""
    data, notes, _ = _victim(tmp)
    files = _untouched(data, notes)
    theirs = tmp / "theirs"
    theirs.mkdir()
    _plant_links(theirs, data, notes)
    (tmp / "out" / ".o.djx-state").symlink_to(theirs)
    return _refused(tmp, files, djx("process", "r.yaml", "--quiet", "--restart", cwd=tmp))


def _tmp_link_case(fmt: str):
    def case(tmp: Path) -> tuple[bool, str]:
        data, notes, _ = _victim(tmp, f"out/o{fmt}")
        files = _untouched(data, notes)
        for name in (f"o{fmt}", f"o.dropped{fmt}", f"o.rejected{fmt}"):
            (tmp / "out" / f"{name}.tmp").symlink_to(notes)
        proc = djx("process", "r.yaml", "--quiet", cwd=tmp)
        export = tmp / "out" / f"o{fmt}"
        held = (proc.returncode == 0 and _untouched(data, notes) == files and export.is_file()
                and not export.is_symlink())
        return held, f"exit {proc.returncode}; notes {'untouched' if _untouched(notes) == {notes: files[notes]} else 'WRITTEN'}"
    case.__doc__ = f"a planted <dest>.tmp link beside a {fmt} export"
    return case


def convert_planted_names(tmp: Path) -> tuple[bool, str]:
    """`djx convert`: <out>.part and <stem>.rejected.jsonl planted as links to the victim's notes."""
    notes = tmp / "notes.txt"
    notes.write_text("my notes, not to be lost\n")
    good = {"id": "1", "image": "a.jpg", "conversations": [{"from": "human", "value": "<image>\nwhat?"},
                                                           {"from": "gpt", "value": "a cat"}]}
    write_jsonl(tmp / "llava.jsonl", [good, {"id": "2"}])
    (tmp / "djx.jsonl.part").symlink_to(notes)
    (tmp / "djx.rejected.jsonl").symlink_to(notes)
    proc = djx("convert", "llava-to-djx", "llava.jsonl", "djx.jsonl", cwd=tmp)
    intact = notes.read_text() == "my notes, not to be lost\n"
    return intact and proc.returncode == 1, f"exit {proc.returncode}; notes {'untouched' if intact else 'WRITTEN'}"


def _unfinished(tmp: Path) -> Path:
    """A genuine unfinished run of the victim's (stopped by a bad line after 16 samples were saved)."""
    lines = [json.dumps({"id": i, "text": f"sample number {i:04d}"}) for i in range(40)]
    lines[20] = '{"id": 20, "text": '
    (tmp / "d.jsonl").write_text("\n".join(lines) + "\n")
    recipe = {"dataset_path": "d.jsonl", "export_path": "out/o.jsonl", "np": 1, "batch_size": 8,
              "checkpoint_every": 100, "process": [{"text_length_filter": {"min_len": 5}}]}
    (tmp / "fail.yaml").write_text(yaml.safe_dump({**recipe, "on_error": "fail"}))
    (tmp / "r.yaml").write_text(yaml.safe_dump(recipe))
    djx("process", "fail.yaml", "--quiet", cwd=tmp)
    return tmp / "out" / ".o.djx-state"


def forged_finishing_state(tmp: Path) -> tuple[bool, str]:
    """A resume state saying the run finished (fingerprint computed from the readable recipe and input), 96 records of theirs."""
    state = _unfinished(tmp)
    manifest = json.loads((state / "manifest.json").read_text())
    part = "".join(json.dumps({"id": 1000 + i, "text": f"attacker record {i}", "__dj__pos__": i}) + "\n"
                   for i in range(96)).encode()
    (state / "kept.jsonl.part").write_bytes(part)
    (state / "summary.json").write_text(json.dumps({"input": 120, "kept": 96}))
    manifest.update(finishing=True, lengths={"kept": len(part), "dropped": 0, "rejected": 0})
    (state / "manifest.json").write_text(json.dumps(manifest))
    proc = djx("process", "r.yaml", "--quiet", cwd=tmp)
    return one_clear_line(proc) and not (tmp / "out" / "o.jsonl").exists(), \
        f"exit {proc.returncode}: {last_line(proc.stderr)}"


def part_edited_after_checkpoint(tmp: Path) -> tuple[bool, str]:
    """A saved part file changed (same length) after its checkpoint: resuming would export the change."""
    state = _unfinished(tmp)
    part = state / "kept.jsonl.part"
    part.write_bytes(part.read_bytes().replace(b"sample number 0003", b"attacker text 0003"))
    proc = djx("process", "r.yaml", "--quiet", cwd=tmp)
    return one_clear_line(proc) and not (tmp / "out" / "o.jsonl").exists(), \
        f"exit {proc.returncode}: {last_line(proc.stderr)}"


def forged_llava_field(tmp: Path) -> tuple[bool, str]:
    """A djx record with a forged __dj__llava__ (hidden turns, image nsfw.jpg), then `djx convert djx-to-llava`."""
    text = "[[human]]: hello there\n[[gpt]]: a text-only answer <|__dj__eoc|>"
    hidden = {"text": hashlib.sha256(text.encode()).hexdigest()[:32], "orig": {
        "image": "nsfw.jpg", "conversations": [{"from": "human", "value": "<image>\nhidden"},
                                               {"from": "gpt", "value": "hidden answer"}]}}
    write_jsonl(tmp / "d.jsonl", [{"id": "1", "text": text, "images": [], "__dj__llava__": hidden}])
    (tmp / "r.yaml").write_text(yaml.safe_dump({"dataset_path": "d.jsonl", "export_path": "out/o.jsonl", "np": 1,
                                                "process": [{"text_length_filter": {"min_len": 5}}]}))
    djx("process", "r.yaml", "--quiet", cwd=tmp)
    proc = djx("convert", "djx-to-llava", "out/o.jsonl", "llava.json", cwd=tmp)
    try:
        [record] = json.loads((tmp / "llava.json").read_text())
    except (OSError, ValueError) as e:
        return False, f"no LLaVA output: {e}"
    leaked = "image" in record or "hidden" in json.dumps(record)
    return proc.returncode == 0 and not leaked, f"image {record.get('image', 'none')}, hidden turns {'written' if leaked else 'not written'}"


def swapped_image(tmp: Path) -> tuple[bool, str]:
    """A 16x16 image written over a signed 200x200 one, same byte size and mtime: a re-filter with min_width 100."""
    from PIL import Image
    (tmp / "images").mkdir()
    big, small = tmp / "images" / "big.png", tmp / "images" / "small.png"
    Image.new("RGB", (200, 200), "red").save(big)
    Image.new("RGB", (16, 16), "red").save(small)
    write_jsonl(tmp / "d.jsonl", [{"text": "one", "images": [str(big)]}])
    shape = [{"image_shape_filter": {"min_width": 100}}]
    (tmp / "r1.yaml").write_text(yaml.safe_dump({"dataset_path": "d.jsonl", "export_path": "one/o.jsonl", "np": 1,
                                                 "process": shape}))
    (tmp / "r2.yaml").write_text(yaml.safe_dump({"dataset_path": "one/o.jsonl", "export_path": "two/o.jsonl",
                                                 "np": 1, "process": shape}))
    djx("process", "r1.yaml", "--quiet", cwd=tmp)
    st, data = big.stat(), small.read_bytes()
    with open(big, "r+b") as f:
        f.write(data + b"\0" * (st.st_size - len(data)))
    os.utime(big, ns=(st.st_atime_ns, st.st_mtime_ns))
    djx("process", "r2.yaml", "--quiet", cwd=tmp)
    try:
        kept = (tmp / "two" / "o.jsonl").read_text().splitlines()
    except OSError as e:
        return False, f"no re-filter export: {e}"
    return kept == [], f"the swapped image {'dropped' if not kept else 'KEPT on its old signed width'}"


def unusable_key_named(tmp: Path) -> tuple[bool, str]:
    """stats.key of mode 0644: refused, and the run names the key file and why."""
    home = tmp / "home"
    (home / "djx").mkdir(parents=True, mode=0o700)
    key = home / "djx" / "stats.key"
    key.write_bytes(os.urandom(32))
    os.chmod(key, 0o644)
    write_jsonl(tmp / "d.jsonl", [{"text": "a text long enough", "__dj__stats__": {"text_len": 3}}])
    (tmp / "r.yaml").write_text(yaml.safe_dump({"dataset_path": "d.jsonl", "export_path": "out/o.jsonl", "np": 1,
                                                "process": [{"text_length_filter": {"min_len": 5}}]}))
    proc = djx("process", "r.yaml", cwd=tmp, env={**os.environ, "XDG_DATA_HOME": str(home)})
    named = str(key) in proc.stdout and "0644" in proc.stdout
    return named, "key file and mode named" if named else f"not named: {last_line(proc.stdout)}"


def planted_analysis_folder(tmp: Path) -> tuple[bool, str]:
    """<stem>.analysis/ made by someone else, report.html and stats.csv linked to the victim's notes; `djx analyze`."""
    data, notes, _ = _victim(tmp)
    djx("process", "r.yaml", "--quiet", cwd=tmp)
    files = _untouched(data, notes)
    planted = tmp / "out" / "o.analysis"
    planted.mkdir()
    for name in ("report.html", "stats.csv"):
        (planted / name).symlink_to(notes)
    os.chmod(planted, 0o777)
    if os.getuid() == 0:
        os.lchown(planted, OTHER_UID, OTHER_UID)
    proc = djx("analyze", "out/o.jsonl", cwd=tmp)
    return one_clear_line(proc) and _untouched(data, notes) == files, \
        f"exit {proc.returncode}: {last_line(proc.stderr)}"


CASES = [
    Case("export", "ef_planted_state_folder", planted_state_folder),
    Case("export", "ef_planted_state_folder_link", planted_state_link),
    Case("export", "ef_planted_tmp_link_json", _tmp_link_case(".json")),
    Case("export", "ef_planted_tmp_link_parquet", _tmp_link_case(".parquet")),
    Case("export", "ef_convert_planted_part_and_rejects", convert_planted_names),
    Case("export", "ef_forged_finishing_state", forged_finishing_state),
    Case("export", "ef_part_edited_after_checkpoint", part_edited_after_checkpoint),
    Case("export", "ef_forged_llava_field", forged_llava_field),
    Case("export", "ef_image_swapped_same_size_mtime", swapped_image),
    Case("export", "ef_unusable_stats_key_named", unusable_key_named),
    Case("export", "ef_planted_analysis_folder", planted_analysis_folder),
]
