"""Files another user or a received dataset controls: they must never run code or choose verdicts."""
from __future__ import annotations

import json
import os
import pickle
import shutil
import tempfile
from pathlib import Path

import yaml

from .common import Case, djx, last_line, write_jsonl


class _Planted:
    """Unpickling this runs code: it creates the file `marker`."""

    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def squatted_weights_root(tmp: Path) -> tuple[bool, str]:
    """Another user (or a loose mode) made djx-weights-<uid> first: djx must not put its run folder there."""
    from djx.core.models.share.folder import create_run_folder, private, share_root
    base = tempfile.mkdtemp(prefix="djx-redteam-shm-")
    os.chmod(base, 0o1777)
    root = share_root(base)
    os.mkdir(root)
    os.chmod(root, 0o777)
    if os.getuid() == 0:
        os.chown(root, 65534, 65534)
    try:
        folder = create_run_folder(base)
        held = not folder.startswith(root + os.sep) and private(folder)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return held, f"run folder {'beside' if held else 'inside'} the squatted root ({'other owner' if os.getuid() == 0 else 'mode 0777'})"


def planted_skeleton(tmp: Path) -> tuple[bool, str]:
    """A <key>.skeleton pickle planted in the run folder must be refused before it is unpickled."""
    from djx.core.errors import DjxError
    from djx.core.models.share.split import spec_key
    from djx.core.models.share.weight_share import WeightShare
    folder, marker, spec = tmp / "run", tmp / "code-ran", ("m", 1)
    folder.mkdir(mode=0o700)
    (folder / f"{spec_key(spec, 'cpu')}.skeleton").write_bytes(b"\0" * 32 + pickle.dumps(_Planted(str(marker))))
    (folder / f"{spec_key(spec, 'cpu')}.pt").write_bytes(b"")
    try:
        WeightShare(folder=str(folder)).load(lambda s, d: None, spec, "cpu")
        error = "loaded"
    except DjxError as e:
        error = str(e)
    except Exception as e:  # noqa: BLE001
        error = f"{type(e).__name__}"
    return not marker.exists() and "not written by this run" in error, \
        "planted pickle ran code" if marker.exists() else "refused before unpickling (not signed by this run)"


def explain_imports_summary_plugins(tmp: Path) -> tuple[bool, str]:
    """`djx explain` and `djx analyze` of a received run must not import the plug-ins its summary names."""
    write_jsonl(tmp / "d.jsonl", [{"text": "a text long enough"}])
    (tmp / "r.yaml").write_text(yaml.safe_dump({"dataset_path": "d.jsonl", "export_path": "out/o.jsonl", "np": 1,
                                                "process": [{"text_length_filter": {"min_len": 3}}]}))
    djx("process", "r.yaml", "--quiet", cwd=tmp)
    marker = tmp / "code-ran"
    (tmp / "evil.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    summary = tmp / "out" / "o.summary.json"
    s = json.loads(summary.read_text())
    s["recipe"]["custom_ops"] = [str(tmp / "evil.py")]
    summary.write_text(json.dumps(s))
    explain = djx("explain", "out/o.jsonl", "0", cwd=tmp)
    djx("analyze", "out/o.jsonl", cwd=tmp)
    return not marker.exists() and explain.returncode == 0, \
        "code ran" if marker.exists() else f"no code ran; explain exit {explain.returncode}"


def forged_stats(tmp: Path) -> tuple[bool, str]:
    """Forged __dj__stats__ (impossible values included) must not decide verdicts."""
    write_jsonl(tmp / "d.jsonl", [{"text": "tiny", "__dj__stats__": {"text_len": 50}},
                                  {"text": "a text that is long enough", "__dj__stats__": {"text_len": -1}}])
    (tmp / "r.yaml").write_text(yaml.safe_dump({"dataset_path": "d.jsonl", "export_path": "out/o.jsonl", "np": 1,
                                                "process": [{"text_length_filter": {"min_len": 10}}]}))
    proc = djx("process", "r.yaml", "--quiet", cwd=tmp)
    kept = [json.loads(line)["text"] for line in (tmp / "out" / "o.jsonl").read_text().splitlines()] \
        if proc.returncode == 0 else []
    return kept == ["a text that is long enough"], f"kept {kept} (exit {proc.returncode})"


def stats_not_an_object(tmp: Path) -> tuple[bool, str]:
    """A __dj__stats__ that is a string, list, number or null is bad_input, not an op_error."""
    write_jsonl(tmp / "d.jsonl", [{"text": "a text", "__dj__stats__": v} for v in ("x", [1], 3, None)])
    (tmp / "r.yaml").write_text(yaml.safe_dump({"dataset_path": "d.jsonl", "export_path": "out/o.jsonl", "np": 1,
                                                "process": [{"text_length_filter": {"min_len": 1}}]}))
    djx("process", "r.yaml", "--quiet", cwd=tmp)
    try:
        codes = json.loads((tmp / "out" / "o.summary.json").read_text())["rejected_by_code"]
    except (OSError, ValueError, KeyError) as e:
        return False, f"no summary: {e}"
    return codes == {"bad_input": 4}, f"rejected by code: {codes}"


def check_impossible_stats(tmp: Path) -> tuple[bool, str]:
    """`djx check` must not call an export with impossible stat values clean."""
    write_jsonl(tmp / "d.jsonl", [{"text": "a text long enough"}])
    (tmp / "r.yaml").write_text(yaml.safe_dump({"dataset_path": "d.jsonl", "export_path": "out/o.jsonl", "np": 1,
                                                "process": [{"text_length_filter": {"min_len": 3}}]}))
    djx("process", "r.yaml", "--quiet", cwd=tmp)
    sample = json.loads((tmp / "out" / "o.jsonl").read_text())
    sample["__dj__stats__"]["text_len"] = -1
    (tmp / "out" / "o.jsonl").write_text(json.dumps(sample) + "\n")
    proc = djx("check", "out/o.jsonl", "--recipe", "r.yaml", cwd=tmp)
    return proc.returncode == 1, f"check exit {proc.returncode}: {last_line(proc.stdout)}"


CASES = [
    Case("security", "sec_weights_root_squatted", squatted_weights_root),
    Case("security", "sec_planted_skeleton", planted_skeleton),
    Case("security", "sec_explain_imports_summary_plugins", explain_imports_summary_plugins),
    Case("security", "sec_forged_stats_choose_verdicts", forged_stats),
    Case("security", "sec_stats_not_an_object", stats_not_an_object),
    Case("security", "sec_check_calls_impossible_stats_clean", check_impossible_stats),
]
