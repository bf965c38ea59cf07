"""The Ray executor: `executor: ray` runs the same recipe through Ray Data and writes what the
local executor writes (same kept, dropped and rejected samples, same stats, same counts).

The session's local Ray cluster (num_cpus=2, in a process of its own; see conftest.ray_address)
serves the runs, which join it with `ray_address`; one test lets the executor start and stop a Ray
of its own.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from djx import Pipeline
from djx.core.records import FailFast
from djx.core.errors import DjxError

from conftest import LONG, PLUGINS_DIR, REPO_DIR, read_jsonl_file
from helpers import (N, assert_same_run, djx, held_run_outputs, hold, kill_when, outputs_by_position as outputs,
                     setup_held_run)

pytestmark = pytest.mark.ray  # every test here runs the Ray executor (and is slow: see conftest)

DEMO = REPO_DIR / "configs" / "demo.yaml"


# -- helpers ----------------------------------------------------------------------------------

def write_lines(path: Path, lines: list[bytes], final_newline: bool = True) -> Path:
    path.write_bytes(b"\n".join(lines) + (b"\n" if final_newline else b""))
    return path


def run_both(tmp_path: Path, write_recipe, name: str, address: str, per_executor=None, **keys) -> dict:
    """Run one recipe with each executor; {executor: (summary, {kind: {pos: record}})}.
    `per_executor` maps an executor to keys that replace the shared ones in its run."""
    out = {}
    for executor in ("local", "ray"):
        extra = {"ray_address": address} if executor == "ray" else {"start_method": "fork"}
        recipe = write_recipe(tmp_path / f"{name}-{executor}.yaml", executor=executor,
                              export_path=f"{name}/{executor}/kept.jsonl", **extra,
                              **{**keys, **(per_executor or {}).get(executor, {})})
        summary = Pipeline.from_recipe(str(recipe)).run(progress=False, log=lambda *a: None)
        out[executor] = (summary, outputs(tmp_path / name / executor))
    return out


def mm_lines(records: list[dict]) -> list[bytes]:
    """The records as JSON lines, plus what real files hold: a broken line, a blank line, a JSON
    value that is not an object, bad UTF-8, CRLF, and a text with U+2028 (valid inside JSON)."""
    lines = [json.dumps(r).encode() for r in records]
    lines[3:3] = [b'{"text": "cut off', b"", b"[1, 2, 3]", b"\xff\xfe not utf-8", b"   "]
    lines[9] += b"\r"
    lines.insert(12, json.dumps({"text": LONG + "\u2028 line separator", "images": []},
                                ensure_ascii=False).encode())
    return lines


# -- the CLI; joining a cluster, or starting and stopping a local Ray ----------------------------

def test_cli_executor_ray_writes_what_the_local_executor_writes(ray_address, tmp_path, mm_records,
                                                                 mm_process, write_recipe):
    import ray
    from djx.cli import main

    data = write_lines(tmp_path / "data.jsonl", mm_lines(mm_records))
    recipe = write_recipe(tmp_path / "recipe.yaml", dataset_path=str(data), export_path="local/kept.jsonl",
                          np=2, batch_size=5, start_method="fork", process=mm_process)
    assert main(["process", str(recipe), "--quiet"]) == 0
    assert main(["process", str(recipe), "--executor", "ray", "--quiet",
                 "--set", f"ray_address='{ray_address}'",
                 "--export-path", str(tmp_path / "ray" / "kept.jsonl")]) == 0
    assert not ray.is_initialized()  # joined the cluster for the run only
    summaries = {ex: json.loads((tmp_path / ex / "kept.summary.json").read_text()) for ex in ("local", "ray")}
    assert_same_run({ex: (summaries[ex], outputs(tmp_path / ex)) for ex in summaries})
    # both write the kept samples in input order, byte for byte
    assert (tmp_path / "ray" / "kept.jsonl").read_text() == (tmp_path / "local" / "kept.jsonl").read_text()


def test_without_ray_address_a_local_ray_is_started_and_shut_down(tmp_path, text_dataset, write_recipe):
    # a process of its own: Ray Data does not take switching clusters inside one process well
    recipe = write_recipe(tmp_path / "recipe.yaml", dataset_path=str(text_dataset.path), executor="ray",
                          export_path="out/kept.jsonl", np=1,
                          process=[{"text_length_filter": {"min_len": 3}}])
    script = ("import sys, ray; from djx.cli import main; rc = main(sys.argv[1:]); "
              "print('connected after the run:', ray.is_initialized()); sys.exit(rc)")
    # a temp folder of its own (short: Ray's sockets live under RAY_TMPDIR, kept as it was) to see
    # what the run leaves there: nothing, not even the empty folder Ray was started from
    temp = tempfile.mkdtemp(prefix="djx-t-")
    env = dict(os.environ, TMPDIR=temp, RAY_TMPDIR=os.environ.get("RAY_TMPDIR", tempfile.gettempdir()))
    try:
        proc = subprocess.run([sys.executable, "-c", script, "process", str(recipe), "--quiet"],
                              capture_output=True, text=True, timeout=300, env=env)
        left = os.listdir(temp)
    finally:
        shutil.rmtree(temp, ignore_errors=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "connected after the run: False" in proc.stdout
    assert left == []
    summary = json.loads((tmp_path / "out" / "kept.summary.json").read_text())
    assert summary["executor"] == "ray" and summary["check"]["ok"]
    assert summary["kept"] == len(text_dataset.kept_ids(3)) and summary["rejected"] == text_dataset.bad_lines
    assert summary["blank_lines"] == text_dataset.blank_lines


# -- same results as the local executor ----------------------------------------------------------

def test_ray_matches_local_on_images_broken_lines_and_missing_files(ray_address, tmp_path, mm_records,
                                                                    mm_process, write_recipe):
    data = write_lines(tmp_path / "data.jsonl", mm_lines(mm_records), final_newline=False)
    both = run_both(tmp_path, write_recipe, "mm", ray_address, dataset_path=str(data), np=2, batch_size=4,
                    process=mm_process)
    summary = assert_same_run(both)
    _, out = both["ray"]
    assert summary["input"] == len(mm_records) + 4 and summary["blank_lines"] == 2
    expect_kept = [r["id"] for r in mm_records if r["expect"] == "kept"]
    assert [r["id"] for r in out["kept"].values() if "id" in r] == expect_kept
    reasons = {r["line"]: r["reason"] for r in out["rejected"].values()}
    assert reasons[4].startswith("not valid JSON") and reasons[7].startswith("not valid JSON")
    assert any("file not found" in r for r in reasons.values())
    assert summary["max_model_loads_per_process"] == 0 and summary["model_loads"]


def test_ray_reads_parquet_like_the_local_reader(ray_address, tmp_path, mm_records, mm_process, write_recipe):
    import pyarrow as pa
    import pyarrow.parquet as pq
    rows = [r for r in mm_records if isinstance(r["text"], str)]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "data.parquet", row_group_size=7)
    both = run_both(tmp_path, write_recipe, "pq", ray_address, dataset_path=str(tmp_path / "data.parquet"),
                    np=1, batch_size=6, process=mm_process)
    summary = assert_same_run(both)
    assert summary["input"] == len(rows) and summary["kept"] == sum(r["expect"] == "kept" for r in rows)


def test_plugin_ops_and_custom_tokens_reach_the_ray_actors(ray_address, tmp_path, plugin_site, write_recipe):
    # data written with the tokens <image> and <eoc>, which the recipe declares
    texts = ["<image> a red circle <eoc> <image> a blue square <eoc>", "<image> one green triangle",
             "no image here <eoc> none here either", "<image> <image> two in one chunk <eoc> tail"]
    (tmp_path / "data.jsonl").write_text(
        "".join(json.dumps({"id": i, "text": texts[i % 4]}) + "\n" for i in range(40)))
    def process(executor):  # the first batch waits until a later one has passed (on the other worker)
        (tmp_path / f"passed-{executor}").mkdir()
        return [{"token_layout_filter": {"min_chunks": 1}},
                {"wait_for_later_batches_mapper": {"ids": [0], "later": 1,
                                                   "folder": str(tmp_path / f"passed-{executor}")}}]

    both = run_both(tmp_path, write_recipe, "tok", ray_address, dataset_path=str(tmp_path / "data.jsonl"),
                    np=2, batch_size=3, image_special_token="<image>", eoc_special_token="<eoc>",
                    custom_ops=[str(PLUGINS_DIR / "ray_plugin_ops.py"), "djx_test_plugin_ops"],
                    per_executor={ex: {"process": process(ex)} for ex in ("local", "ray")})
    summary = assert_same_run(both)
    _, out = both["ray"]
    stats = {r["id"]: r["__dj__stats__"] for kind in ("kept", "dropped") for r in out[kind].values()}
    expected = [(2, 2), (1, 1), (0, 0), (2, 1)]  # (image tokens, chunks with images) under <image>/<eoc>
    assert all((s["image_tokens"], s["image_chunks"]) == expected[i % 4] for i, s in stats.items())
    assert [r["id"] for r in out["kept"].values()] == [i for i in range(40) if i % 4 != 2]
    assert summary["dropped"] == 10
    kept = [(tmp_path / "tok" / ex / "kept.jsonl").read_text() for ex in ("local", "ray")]
    assert kept[0] == kept[1]  # in input order, although later batches finished first


def test_ops_sharing_a_model_run_in_one_actor_and_load_it_once(ray_address, tmp_path, text_dataset,
                                                                write_recipe):
    # one stage for the whole chain (its models fit a node), as a local worker runs it: one actor
    # loads table a once for its two ops, and table bb
    table = lambda model, score: {"letter_score_filter": {"model": model, "min_score": score}}  # noqa: E731
    both = run_both(tmp_path, write_recipe, "shared", ray_address, dataset_path=str(text_dataset.path),
                    np=1, batch_size=4, custom_ops=[str(PLUGINS_DIR / "ray_plugin_ops.py")],
                    process=[{"text_length_filter": {"min_len": 2}}, table("a", 0.38), table("a", 0.42),
                             table("bb", 0.46)])
    summary = assert_same_run(both)
    assert summary["max_model_loads_per_process"] == 1
    loads = sorted(sorted(loads) for loads in summary["model_loads"].values() if loads)
    assert loads == [["letter_table:a:float32", "letter_table:bb:float32"]]
    assert [counts for counts in summary["model_loads"].values() if counts] == [
        {"letter_table:a:float32": 1, "letter_table:bb:float32": 1}]
    # drop records name each op by its index in the whole chain
    _, out = both["ray"]
    assert {r["__dj__drop__"]["op_index"] for r in out["dropped"].values()} == {0, 1, 2, 3}


def test_a_plugin_models_weights_are_loaded_once_for_the_actors_that_share_them(ray_address, tmp_path,
                                                                                text_dataset, write_recipe):
    # np: 2: a Ray task loads the plug-in's model (its worker imports the plug-in, as the actors do)
    # and both actors map its weights from the object store: the summary counts one shared copy
    both = run_both(tmp_path, write_recipe, "weights", ray_address, dataset_path=str(text_dataset.path),
                    np=2, batch_size=4, custom_ops=[str(PLUGINS_DIR / "ray_plugin_ops.py")],
                    process=[{"letter_weight_filter": {"model": "w", "min_score": 0.0}}])
    summary = assert_same_run(both)
    assert summary["kept"] > 0 and summary["dropped"] > 0
    assert summary["memory"]["shared_weight_bytes_per_device"] == {"cpu": 26 * 26 * 4}
    assert summary["max_model_loads_per_process"] == 1


def test_on_error_fail_stops_at_the_same_line_as_local(ray_address, tmp_path, write_recipe):
    write_lines(tmp_path / "data.jsonl", [json.dumps({"text": LONG}).encode()] * 5 + [b"{oops"]
                + [json.dumps({"text": LONG}).encode()] * 5)
    messages = []
    for executor in ("local", "ray"):
        recipe = write_recipe(tmp_path / f"{executor}.yaml", dataset_path="data.jsonl", executor=executor,
                              export_path=f"{executor}/kept.jsonl", on_error="fail", batch_size=4, np=1,
                              start_method="fork", ray_address=ray_address,
                              process=[{"text_length_filter": {"min_len": 1}}])
        with pytest.raises(FailFast) as e:
            Pipeline.from_recipe(str(recipe)).run(progress=False, log=lambda *a: None)
        messages.append(str(e.value))
    assert messages[0].startswith("line 6: not valid JSON") and messages[1] == messages[0]


def test_samples_that_kill_their_actor_are_rejected_and_the_rest_kept(ray_address, tmp_path, write_recipe):
    poison = {13, 14, 30}  # two in one batch, one in another
    (tmp_path / "data.jsonl").write_text(
        "".join(json.dumps({"id": i, "text": LONG, "poison": i in poison}) + "\n" for i in range(40)))
    both = {}
    for executor in ("local", "ray"):
        recipe = write_recipe(tmp_path / f"{executor}.yaml", dataset_path="data.jsonl",
                              export_path=f"{executor}/kept.jsonl", executor=executor, ray_address=ray_address,
                              np=1, batch_size=8, start_method="fork",
                              custom_ops=[str(PLUGINS_DIR / "chaos_ops.py")],
                              process=[{"text_length_filter": {"min_len": 5}}, {"poison_filter": {}}])
        summary = Pipeline.from_recipe(str(recipe)).run(progress=False, log=lambda *a: None)
        both[executor] = (summary, outputs(tmp_path / executor))
    (_, local_out), (summary, ray_out) = both["local"], both["ray"]
    assert (summary["input"], summary["kept"], summary["rejected"]) == (40, 37, 3)
    assert summary["check"]["ok"] and [op["rejected"] for op in summary["ops"]] == [0, 3]
    # each poison batch: one death on the whole batch, then one per poison sample
    assert summary["worker_restarts"] == 5 and summary["events"]["actor_deaths"] == 5
    assert ray_out["kept"] == local_out["kept"]
    assert sorted(ray_out["rejected"]) == sorted(local_out["rejected"]) == sorted(poison)
    for pos, rec in ray_out["rejected"].items():
        assert rec["record"]["id"] == pos and rec["line"] == pos + 1 and rec["code"] == "worker_died"
        assert rec["op"] == "poison_filter" and "worker died while running poison_filter" in rec["reason"]


def test_a_run_killed_mid_file_resumes_on_ray_at_its_offset_to_the_same_outputs(ray_address, tmp_path):
    """The checkpoint comes from a local run, held and killed past sample 60 of one file: a Ray
    driver gets a file's rows only once the file's block is done, so no state holds it mid-file
    (a killed Ray driver is tested over several files in test_multi_file)."""
    ref_dir, run_dir = tmp_path / "ref", tmp_path / "run"
    ref_dir.mkdir()
    run_dir.mkdir()
    ref = djx("process", str(setup_held_run(ref_dir)), "--quiet")
    assert ref.wait() == 0, ref.stderr.read()
    recipe = setup_held_run(run_dir, ray_address=ray_address)
    hold(run_dir, 76)
    proc = djx("process", str(recipe), "--quiet", start_new_session=True)
    kill_when(run_dir, proc, 60)
    done = json.loads((run_dir / "out/.o.djx-state/manifest.json").read_text())["read"]["records"]
    assert 60 <= done < N
    final = djx("process", str(recipe), "--quiet", "--executor", "ray")
    out, err = final.communicate()
    assert final.returncode == 0, err
    assert f"resuming: {done} samples already done" in out + err
    assert held_run_outputs(run_dir) == held_run_outputs(ref_dir)
    summary = json.loads((run_dir / "out/o.summary.json").read_text())
    assert summary["resumed"] and summary["executor"] == "ray" and summary["input"] == N
    assert summary["ops"][0]["in"] == N and summary["check"]["ok"]


def test_a_json_array_file_is_refused_with_a_clear_error(tmp_path, write_recipe):
    (tmp_path / "data.json").write_text(json.dumps([{"text": LONG}]))
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path="data.json", export_path="out/kept.jsonl",
                          executor="ray", process=[{"text_length_filter": {"min_len": 1}}])
    with pytest.raises(DjxError, match=r"\.jsonl.*parquet"):
        Pipeline.from_recipe(str(recipe)).run(progress=False, log=lambda *a: None)


# -- the demo recipe, with its two models ---------------------------------------------------------

def test_demo_recipe_gives_the_same_samples_and_stats_on_ray(ray_address, tmp_path):
    both = {}
    for executor in ("local", "ray"):
        pipe = Pipeline.from_recipe(str(DEMO), {"executor": executor, "ray_address": ray_address,
                                                "start_method": "fork",
                                                "export_path": str(tmp_path / executor / "kept.jsonl")})
        summary = pipe.run(progress=False, log=lambda *a: None)
        both[executor] = (summary, outputs(tmp_path / executor))
    summary = assert_same_run(both)
    assert summary["kept"] > 0 and summary["dropped"] > 0
    assert summary["max_model_loads_per_process"] == 1
    # the actors' declared memory counts the models: their footprints are estimated for Ray
    assert all(b > 0 for b in summary["plan"]["model_bytes"].values())
    # where the time went, per model op, on Ray as locally: the stage actors' phases reach the summary
    phases = {ex: s["time_breakdown"]["ops"] for ex, (s, _) in both.items()}
    assert set(phases["ray"]) == set(phases["local"]) == {"image_text_similarity_filter", "image_text_matching_filter"}
    assert all(p["forward"] > 0 and p["preprocess"] > 0 for p in phases["ray"].values())
    # and its start-up's parts: joining Ray, the stage actor starting and setting up, the first batch
    timing = both["ray"][0]["timing"]
    parts = timing["startup_parts"]
    assert parts["ray_init"] > 0 and parts["worker_setup"] > 0 and parts["imports"] > 0
    assert parts["main"] + parts["workers_ready"] + parts["first_batch"] == pytest.approx(timing["startup_seconds"], abs=0.02)
    assert parts["ray_init"] + parts["workers_start"] + parts["worker_setup"] == pytest.approx(parts["workers_ready"], abs=0.02)


def test_a_sample_stuck_in_an_op_is_rejected_with_code_timeout_on_ray(ray_address, tmp_path, write_recipe):
    (tmp_path / "data.jsonl").write_text(
        "".join(json.dumps({"id": i, "text": LONG, "stuck": i == 13}) + "\n" for i in range(24)))
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path="data.jsonl", export_path="out/kept.jsonl",
                          executor="ray", ray_address=ray_address, np=1, batch_size=8, sample_timeout=3,
                          custom_ops=[str(PLUGINS_DIR / "stuck_ops.py")],
                          process=[{"text_length_filter": {"min_len": 5}}, {"stuck_filter": {}}])
    summary = Pipeline.from_recipe(str(recipe)).run(progress=False, log=lambda *a: None)
    rejected = read_jsonl_file(tmp_path / "out" / "kept.rejected.jsonl")
    assert [(r["record"]["id"], r["code"], r["op"]) for r in rejected] == [(13, "timeout", "stuck_filter")]
    assert "sample_timeout" in rejected[0]["reason"]
    assert (summary["input"], summary["kept"], summary["rejected"]) == (24, 23, 1) and summary["check"]["ok"]


BATCH_PROBE = '''
from djx import Filter, register_op


@register_op("batch_probe_filter")
class BatchProbeFilter(Filter):
    """Records how many samples the op call that scored a sample held."""

    stats_keys = ("batch_samples",)

    def compute_stats(self, batch):
        for sample in batch.samples:
            batch.stats(sample)["batch_samples"] = len(batch.samples)

    def keep(self, stats):
        return True
'''


def test_batches_are_bounded_in_bytes_on_ray_as_on_local(ray_address, tmp_path, write_recipe):
    (tmp_path / "probe.py").write_text(BATCH_PROBE)
    line = json.dumps({"text": "y" * 1000}) + "\n"
    (tmp_path / "data.jsonl").write_text(line * 40)
    seen = {}
    for executor in ("local", "ray"):
        recipe = write_recipe(tmp_path / f"{executor}.yaml", dataset_path="data.jsonl",
                              export_path=f"{executor}/kept.jsonl", executor=executor, ray_address=ray_address,
                              np=1, batch_size=16, max_batch_bytes=3 * len(line), start_method="fork",
                              custom_ops=[str(tmp_path / "probe.py")], process=[{"batch_probe_filter": {}}])
        summary = Pipeline.from_recipe(str(recipe)).run(progress=False, log=lambda *a: None)
        assert summary["kept"] == 40 and summary["check"]["ok"]
        kept = read_jsonl_file(tmp_path / executor / "kept.jsonl")
        seen[executor] = {s["__dj__stats__"]["batch_samples"] for s in kept}
    # a batch ends once its lines reach max_batch_bytes: 3 or 4 lines here, never batch_size's 16
    assert max(seen["local"]) in (3, 4) and max(seen["ray"]) in (3, 4)


def test_a_line_over_max_record_bytes_is_rejected_on_ray_as_on_local(ray_address, tmp_path, write_recipe):
    """Lines over the limit: one inside a read chunk, one of 5 MiB across chunks (read past, never
    held whole), the last without its newline; each rejected with its size, the rest kept."""
    lines = [json.dumps({"text": f"sample {i} " + "z" * 40}).encode() for i in range(30)]
    lines[4] = json.dumps({"text": "a" * 3000}).encode()
    lines[17] = json.dumps({"text": "b" * (5 << 20)}).encode()
    lines.append(json.dumps({"text": "c" * 2500}).encode())
    write_lines(tmp_path / "data.jsonl", lines, final_newline=False)
    both = run_both(tmp_path, write_recipe, "limit", ray_address, dataset_path="data.jsonl", np=1,
                    max_record_bytes=2000, process=[{"text_length_filter": {"min_len": 10}}])
    summary = assert_same_run(both)
    rejected = both["ray"][1]["rejected"]
    assert summary["rejected"] == 3 and summary["kept"] == 28
    at = {pos: sum(len(line) + 1 for line in lines[:pos]) for pos in (4, 17, 30)}
    for pos, size in ((4, len(lines[4]) + 1), (17, len(lines[17]) + 1), (30, len(lines[30]))):
        assert rejected[pos]["code"] == "bad_input"
        assert rejected[pos]["reason"].startswith(f"the line at byte {at[pos]} is {size:,} bytes, over max_record_bytes (2,000)")


def test_a_killed_poison_tracker_actor_stops_the_run_with_a_message_and_the_rerun_resumes(ray_address, tmp_path,
                                                                                         write_recipe):
    (tmp_path / "data.jsonl").write_text(
        "".join(json.dumps({"id": i, "text": LONG, "kill_ledger": i == 9}) + "\n" for i in range(40)))
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path="data.jsonl", export_path="out/kept.jsonl",
                          executor="ray", ray_address=ray_address, np=1, batch_size=4, checkpoint_every=1,
                          custom_ops=[str(PLUGINS_DIR / "chaos_ops.py")],
                          process=[{"kill_ray_ledger_mapper": {"done_file": str(tmp_path / "killed")}},
                                   {"text_length_filter": {"min_len": 5}}])
    with pytest.raises(DjxError) as e:
        Pipeline.from_recipe(str(recipe)).run(progress=False, log=lambda *a: None)
    assert "poison-sample tracker (a Ray actor) died" in str(e.value) and "run the same command" in str(e.value)
    assert (tmp_path / "killed").exists()
    summary = Pipeline.from_recipe(str(recipe)).run(progress=False, log=lambda *a: None)
    assert summary["check"]["ok"] and summary["input"] == 40  # resumed from what reached the driver, if any
    kept = read_jsonl_file(tmp_path / "out" / "kept.jsonl")
    assert sorted(s["id"] for s in kept) == list(range(40))


def test_runs_in_one_process_leave_no_ray_data_prefetcher_behind(ray_address, tmp_path, text_dataset, write_recipe):
    """Ray Data starts a block prefetcher thread per iteration and never stops it; one that wakes
    after Ray shut down ends the whole process (a notebook, a test session). A run stops its own."""
    import threading
    before = {t for t in threading.enumerate() if t.name == "Prefetcher"}
    for k in range(2):
        recipe = write_recipe(tmp_path / f"r{k}.yaml", dataset_path=str(text_dataset.path), executor="ray",
                              ray_address=ray_address, export_path=f"o{k}/kept.jsonl",
                              process=[{"text_length_filter": {"min_len": 3}}])
        assert Pipeline.from_recipe(str(recipe)).run(progress=False, log=lambda *a: None)["kept"]
        assert {t for t in threading.enumerate() if t.name == "Prefetcher"} <= before
