"""Interrupt and resume: kill -9 a real `djx process` at several points; running the same command
again finishes the work, and the outputs hold each input sample exactly once.

Runs are stopped at known points by state, never by time: the recipe's hold_mapper holds every
batch from a given sample id on until the test releases it, so a run cannot finish (or pass the
point) before the test acts, however busy the machine."""
import io
import json
import os
import signal

import pytest

from conftest import read_jsonl_file
from helpers import (GUARD_S, N, djx, held_run_outputs as outputs, hold, kill_when, manifest_records, release,
                     setup_held_run as setup, wait_for)


@pytest.mark.slow
def test_killed_runs_resume_to_the_same_outputs_with_each_sample_once(tmp_path):
    ref_dir = tmp_path / "ref"
    ref_dir.mkdir()
    ref = djx("process", str(setup(ref_dir)), "--quiet")
    assert ref.wait() == 0, ref.stderr.read()
    ref_kept, ref_dropped = outputs(ref_dir)
    assert len(ref_kept) == N // 2

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    recipe = setup(run_dir)
    points = [-1, 40, 150, 260]  # before the first checkpoint, early, middle, late
    for at in points:
        hold(run_dir, max(at + 16, 0))
        proc = djx("process", str(recipe), "--quiet", start_new_session=True)
        if at < 0:  # every batch is held: no checkpoint can happen; kill once the outputs are open
            wait_for(lambda: (run_dir / "out/.o.djx-state/lock").exists(), proc, "open outputs")
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            release(run_dir)
            assert manifest_records(run_dir) == -1
        else:
            kill_when(run_dir, proc, at)
        assert not (run_dir / "out/o.jsonl").exists(), "a killed run must not leave a finished-looking export"
    final = djx("process", str(recipe), "--quiet")
    out, err = final.communicate()
    assert final.returncode == 0, err
    assert "resuming" in out + err
    kept, dropped = outputs(run_dir)
    assert kept == ref_kept and dropped == ref_dropped
    summary = json.loads((run_dir / "out/o.summary.json").read_text())
    assert summary["resumed"] and summary["input"] == N and summary["check"]["ok"]
    assert summary["ops"][2]["in"] == N  # per-op counts carried across the interruptions
    assert not (run_dir / "out/.o.djx-state").exists()


@pytest.mark.slow  # over a second: the full suite's (docs/development.md)
@pytest.mark.parametrize("change", ["recipe", "input"])
def test_a_changed_recipe_or_input_refuses_to_resume_until_restart(tmp_path, change):
    recipe = setup(tmp_path)
    hold(tmp_path, 56)
    proc = djx("process", str(recipe), "--quiet", start_new_session=True)
    kill_when(tmp_path, proc, 40)
    if change == "recipe":
        text = recipe.read_text().replace("min_len: 5", "min_len: 6")
        recipe.write_text(text)
    else:
        with open(tmp_path / "data.jsonl", "a") as f:
            f.write(json.dumps({"id": N, "text": "one more sample"}) + "\n")
    refused = djx("process", str(recipe), "--quiet")
    _, err = refused.communicate()
    assert refused.returncode == 1
    assert f"the {change} changed" in err and "--restart" in err and "Traceback" not in err
    restarted = djx("process", str(recipe), "--quiet", "--restart")
    out, err = restarted.communicate()
    assert restarted.returncode == 0, err
    assert "resuming" not in out + err
    summary = json.loads((tmp_path / "out/o.summary.json").read_text())
    assert summary["input"] == N + (change == "input") and not summary["resumed"]


def test_a_run_that_stops_on_an_error_keeps_its_finished_batches_for_the_resume(tmp_path):
    """on_error: fail stops at a bad line; the batches before it are saved even between
    checkpoints, and the same recipe with on_error: reject resumes there and finishes."""
    from djx import Pipeline
    from djx.core.records import FailFast
    lines = [json.dumps({"id": i, "text": f"sample number {i:04d}"}) for i in range(60)]
    lines[52] = '{"id": 52, "text": '
    (tmp_path / "data.jsonl").write_text("\n".join(lines) + "\n")
    keys = {"dataset_path": str(tmp_path / "data.jsonl"), "batch_size": 8, "np": 1, "start_method": "fork",
            "checkpoint_every": 100, "process": [{"text_length_filter": {"min_len": 5}}]}
    ref = Pipeline(**keys).run(export_path=str(tmp_path / "ref/out/o.jsonl"), progress=False, log=lambda *a: None)
    log = []
    with pytest.raises(FailFast, match="line 53: not valid JSON"):
        Pipeline(**keys, on_error="fail").run(export_path=str(tmp_path / "out/o.jsonl"), progress=False,
                                              log=log.append)
    assert manifest_records(tmp_path) == 48  # six whole batches, none checkpointed before the error
    assert any("stopped after 48 samples" in line for line in log)
    summary = Pipeline(**keys).run(export_path=str(tmp_path / "out/o.jsonl"), progress=False, log=log.append)
    assert any("resuming: 48 samples already done" in line for line in log)
    assert summary["resumed"] and summary["check"]["ok"]
    assert (summary["input"], summary["kept"], summary["rejected"]) == (ref["input"], 59, 1)
    assert outputs(tmp_path) == outputs(tmp_path / "ref")
    assert read_jsonl_file(tmp_path / "out/o.rejected.jsonl")[0]["line"] == 53


def test_a_batch_cut_off_half_written_is_left_out_of_the_save_and_read_again(tmp_path, monkeypatch):
    """The disk fails after a batch's kept lines are written and before its dropped ones: the save
    covers the batches written whole, the resumed run cuts the half batch from the parts and
    reads it again, and the outputs equal an uninterrupted run's."""
    from djx import Pipeline
    from djx.core.errors import DjxError
    from djx.core.io.outputs import OutputWriter
    lines = [json.dumps({"id": i, "text": "x" * (i % 9)}) for i in range(80)]
    (tmp_path / "data.jsonl").write_text("\n".join(lines) + "\n")
    keys = {"dataset_path": str(tmp_path / "data.jsonl"), "batch_size": 8, "np": 1, "start_method": "fork",
            "checkpoint_every": 100, "export_dropped": True, "process": [{"text_length_filter": {"min_len": 5}}]}
    quiet = {"progress": False, "log": lambda *a: None}
    Pipeline(**keys).run(export_path=str(tmp_path / "ref/out/o.jsonl"), **quiet)
    real_write, calls = OutputWriter.write, []

    def failing_write(self, kind, records):
        calls.append(kind)
        if len(calls) == 6 * 3 + 2:  # batch 7: its kept lines are written, its dropped ones fail
            raise OSError(5, "Input/output error")
        real_write(self, kind, records)

    monkeypatch.setattr(OutputWriter, "write", failing_write)
    log = []
    with pytest.raises(DjxError, match="Input/output error"):
        Pipeline(**keys).run(export_path=str(tmp_path / "out/o.jsonl"), progress=False, log=log.append)
    assert manifest_records(tmp_path) == 48 and any("stopped after 48 samples" in line for line in log)
    monkeypatch.setattr(OutputWriter, "write", real_write)
    summary = Pipeline(**keys).run(export_path=str(tmp_path / "out/o.jsonl"), progress=False, log=log.append)
    assert summary["resumed"] and summary["check"]["ok"] and summary["input"] == 80
    assert outputs(tmp_path) == outputs(tmp_path / "ref")


@pytest.mark.slow
def test_ctrl_c_saves_the_finished_batches_and_the_same_command_resumes(tmp_path):
    # records longer than the writer's buffer, so each batch is on disk once the run has taken it
    pad = max(io.DEFAULT_BUFFER_SIZE, os.stat(tmp_path).st_blksize)
    ref_dir = tmp_path / "ref"
    ref_dir.mkdir()
    assert djx("process", str(setup(ref_dir, pad=pad)), "--quiet").wait() == 0
    recipe = setup(tmp_path, pad=pad, checkpoint_every=1000)  # no periodic checkpoint in reach
    hold(tmp_path, 56)  # seven batches can finish, the rest wait
    proc = djx("process", str(recipe), "--quiet")
    parts = tmp_path / "out/.o.djx-state"

    def written():
        return sum(p.read_bytes().count(b"\n") for p in parts.glob("*.jsonl.part"))

    wait_for(lambda: written() == 56, proc, "the seven finished batches in the part files")
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=GUARD_S)
    assert proc.returncode == 130 and "interrupted; run the same command again to resume" in err
    assert "Traceback" not in err
    assert manifest_records(tmp_path) == 56 and "stopped after 56 samples" in out
    release(tmp_path)
    final = djx("process", str(recipe), "--quiet")
    out, err = final.communicate()
    assert final.returncode == 0, err
    assert "resuming: 56 samples already done" in out + err
    assert outputs(tmp_path) == outputs(ref_dir)


def test_a_ctrl_c_inside_a_batch_write_acts_once_the_batch_is_recorded():
    from djx.core.run.stop import ctrl_c_after
    before, done = signal.getsignal(signal.SIGINT), []
    with pytest.raises(KeyboardInterrupt):
        with ctrl_c_after():
            os.kill(os.getpid(), signal.SIGINT)
            done.append("the rest of the batch")
    assert done == ["the rest of the batch"]
    assert signal.getsignal(signal.SIGINT) is before


@pytest.mark.parametrize("damage", ["no seconds", "no read", "counts a list", "lengths of text", "a part removed"])
def test_a_damaged_resume_manifest_is_one_line_that_says_to_restart(tmp_path, write_recipe, djx_cli, damage):
    """A manifest cut or edited by hand (a field missing, one of another type), or a part file
    removed (to free space after a full disk, say), is refused in one line naming --restart, never
    a KeyError or FileNotFoundError; --restart then runs the whole input."""
    lines = [json.dumps({"id": i, "text": f"sample number {i:04d}"}) for i in range(40)]
    lines[30] = '{"id": 30, "text": '
    (tmp_path / "data.jsonl").write_text("\n".join(lines) + "\n")
    keys = dict(dataset_path="data.jsonl", export_path="out/o.jsonl", batch_size=8, np=1, start_method="fork",
                process=[{"text_length_filter": {"min_len": 5}}])
    res = djx_cli("process", write_recipe(tmp_path / "fail.yaml", on_error="fail", **keys), "--quiet")
    assert res.rc == 1 and manifest_records(tmp_path) == 24  # a run to resume
    path = tmp_path / "out/.o.djx-state/manifest.json"
    manifest = json.loads(path.read_text())
    if damage == "no seconds":
        del manifest["counts"]["ops"][0]["seconds"]
    elif damage == "no read":
        del manifest["read"]
    elif damage == "counts a list":
        manifest["counts"] = []
    elif damage == "lengths of text":
        manifest["lengths"] = {"kept": "many"}
    if damage == "a part removed":
        (path.parent / "dropped.jsonl.part").unlink()
    else:
        path.write_text(json.dumps(manifest))
    recipe = write_recipe(tmp_path / "r.yaml", **keys)
    res = djx_cli("process", recipe, "--quiet")
    # an edited manifest no longer carries this user's signature: refused as such, in one line
    assert res.rc == 1 and res.err.startswith("djx: error: resume state ")
    assert "is damaged" in res.err or "will not resume" in res.err
    assert "--restart" in res.err and len(res.err.strip().splitlines()) == 1
    assert djx_cli("process", recipe, "--quiet", "--restart").rc == 0
    assert len(read_jsonl_file(tmp_path / "out/o.jsonl")) + len(read_jsonl_file(tmp_path / "out/o.rejected.jsonl")) == 40


def test_a_resume_whose_images_were_replaced_since_the_kill_is_refused_not_mixed(tmp_path, write_recipe, djx_cli):
    """Images re-exported (smaller) between a stopped run and its rerun: the samples written so far
    were judged on the old files, the rest would be on the new; the rerun refuses in one line
    naming an image, and resumes once they are put back as they were (bytes and mtimes)."""
    from PIL import Image
    (tmp_path / "img").mkdir()
    lines = []
    for i in range(40):
        Image.new("RGB", (80, 60), (i * 6, 90, 30)).save(tmp_path / "img" / f"{i}.png")
        lines.append(json.dumps({"id": i, "text": f"sample {i}", "images": [f"img/{i}.png"]}))
    lines[30] = '{"id": 30, "text": '
    (tmp_path / "data.jsonl").write_text("\n".join(lines) + "\n")
    keys = dict(dataset_path="data.jsonl", export_path="out/o.jsonl", batch_size=8, np=1, start_method="fork",
                process=[{"image_shape_filter": {"min_width": 64}}])
    assert djx_cli("process", write_recipe(tmp_path / "fail.yaml", on_error="fail", **keys), "--quiet").rc == 1
    assert manifest_records(tmp_path) == 24
    originals = {i: ((tmp_path / "img" / f"{i}.png").read_bytes(), (tmp_path / "img" / f"{i}.png").stat())
                 for i in range(40)}
    for i in range(40):  # what a re-export at half size does: same names, other files
        Image.new("RGB", (40, 30), (i * 6, 90, 30)).save(tmp_path / "img" / f"{i}.png")
    recipe = write_recipe(tmp_path / "r.yaml", **keys)
    res = djx_cli("process", recipe, "--quiet")
    assert res.rc == 1 and len(res.err.strip().splitlines()) == 1, res.err
    assert "holds an unfinished run whose images changed since it judged them" in res.err
    assert "bytes now" in res.err and "--restart" in res.err
    assert not (tmp_path / "out" / "o.jsonl").exists()
    for i, (data, st) in originals.items():  # restored from a backup that keeps mtimes (cp -p, rsync -t)
        (tmp_path / "img" / f"{i}.png").write_bytes(data)
        os.utime(tmp_path / "img" / f"{i}.png", ns=(st.st_atime_ns, st.st_mtime_ns))
    res = djx_cli("process", recipe, "--quiet")
    assert res.rc == 0 and "resuming: 24 samples already done" in res.out + res.err, res.err
    kept = read_jsonl_file(tmp_path / "out" / "o.jsonl")
    assert sorted(r["id"] for r in kept) == [i for i in range(40) if i != 30]  # all judged on the same files
