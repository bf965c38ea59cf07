"""Progress a person can read, also in a log: the start-up phase, samples done of the total,
percent, rate and ETA; after a resume the figures count this session's samples."""
import json
import re
import subprocess
import sys

import pytest
import yaml

from conftest import REPO_DIR


@pytest.mark.slow
@pytest.mark.models
def test_a_piped_run_logs_the_loading_phase_then_total_percent_rate_and_eta(tmp_path):
    """The demo recipe (tiny CLIP and BLIP) on a trial of 40 samples, its stderr a pipe."""
    proc = subprocess.run([sys.executable, "-m", "djx.cli", "process", str(REPO_DIR / "configs/demo.yaml"),
                           "--export-path", str(tmp_path / "out/demo.jsonl"), "--limit", "40",
                           "--set", "start_method=fork"],
                          capture_output=True, text=True, env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.startswith("[djx]")]
    assert re.fullmatch(r"\[djx\] starting 1 worker\(s\); loading models: hf_clip:tiny-clip:float32, "
                        r"hf_blip_itm:tiny-blip-itm:float32", lines[0]), lines
    assert re.fullmatch(r"\[djx\] start-up took \d+\.\d s; processing 40 samples", lines[1]), lines
    assert re.fullmatch(r"\[djx\] 32 / 40 samples \(80\.0%\), \d+ kept this session, [\d.]+ samples/s, "
                        r"ETA \d+ s", lines[2]), lines
    assert re.fullmatch(r"\[djx\] 40 / 40 samples \(100\.0%\), 26 kept this session, [\d.]+ samples/s", lines[-1])
    assert "Traceback" not in proc.stderr
    # the demo data is 100 samples: the total of a whole run is counted from the input's lines
    summary = json.loads((tmp_path / "out/demo.summary.json").read_text())
    assert summary["estimate"]["samples"] == 100
    assert "summed over the workers" in summary["ops_seconds_are"]
    assert "op-sec: time inside each op's calls, summed over the workers (not wall time), over 1 worker(s)" \
        in proc.stdout


def test_a_quiet_run_prints_no_progress(tmp_path, djx_cli):
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps({"text": f"text number {i}"}) + "\n" for i in range(20)))
    recipe = tmp_path / "r.yaml"
    recipe.write_text(yaml.safe_dump({"dataset_path": str(data), "export_path": str(tmp_path / "out/o.jsonl"),
                                      "np": 1, "start_method": "fork", "process": []}))
    res = djx_cli("process", recipe, "--quiet")
    assert res.rc == 0 and "[djx]" not in res.err


def test_after_a_resume_progress_counts_the_earlier_samples_as_done_and_rates_this_session(tmp_path, capsys):
    from djx import Pipeline
    from djx.core.records import FailFast
    lines = [json.dumps({"id": i, "text": "long enough" if i % 2 else "short"}) for i in range(60)]
    lines[52] = '{"id": 52, "text": '
    data = tmp_path / "data.jsonl"
    data.write_text("\n".join(lines) + "\n")
    keys = {"dataset_path": str(data), "export_path": str(tmp_path / "out/o.jsonl"), "batch_size": 8, "np": 1,
            "start_method": "fork", "checkpoint_every": 100, "process": [{"text_length_filter": {"min_len": 6}}]}
    with pytest.raises(FailFast):
        Pipeline(**keys, on_error="fail").run(progress=False, log=lambda *a: None)
    capsys.readouterr()
    summary = Pipeline(**keys).run(log=lambda *a: None)  # progress on; stderr is captured: not a terminal
    err = capsys.readouterr().err
    assert summary["resumed"] and summary["session"]["samples"] == 12
    assert "[djx] 48 of 60 samples done; starting 1 worker(s)" in err
    assert "processing 12 samples" in err
    # this session kept the odd ids from 48 on, but 52 is rejected: 49, 51, 53, 55, 57, 59
    assert re.search(r"\[djx\] 60 / 60 samples \(100\.0%\), 6 kept this session, [\d.]+ samples/s\n", err), err


def test_a_terminal_gets_a_bar_with_the_total_from_the_start_of_processing(tmp_path):
    import fcntl
    import os
    import pty
    import struct
    import termios
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps({"text": "x" * (i % 20)}) + "\n" for i in range(3000)))
    recipe = tmp_path / "r.yaml"
    recipe.write_text(yaml.safe_dump({"dataset_path": str(data), "export_path": str(tmp_path / "out/o.jsonl"),
                                      "np": 1, "batch_size": 100, "start_method": "fork",
                                      "process": [{"text_length_filter": {"min_len": 10}}]}))
    parent, child = pty.openpty()
    fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    proc = subprocess.Popen([sys.executable, "-m", "djx.cli", "process", str(recipe), "--limit", "2000"],
                            stderr=child, stdout=subprocess.DEVNULL)
    os.close(child)
    shown = b""
    while True:
        try:
            block = os.read(parent, 4096)
        except OSError:  # the run closed the terminal: it has ended
            break
        if not block:
            break
        shown += block
    assert proc.wait() == 0
    text = shown.decode()
    assert "start-up took" in text and "processing 2,000 samples" in text
    assert re.search(r"100%\|[^\r]*\| 2000/2000 \[[^\]]*sample/s, kept this session=1,000\]", text), repr(text[-500:])
