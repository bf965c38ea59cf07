"""The planner sizes GPU workers from free memory, model footprints and gpu_mem_fraction."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from djx import DeviceInfo, RecipeError, plan_workers
from djx.core.plan.planner import WORKER_OVERHEAD

GiB = 1 << 30
DEMO = Path(__file__).resolve().parent.parent / "configs" / "demo.yaml"
MODELS = {"hf_clip:clip:float32": 1 * GiB, "hf_blip_itm:blip:float32": 2 * GiB}
PER_WORKER = 3 * GiB + WORKER_OVERHEAD


def gpus(*free_gib, total_gib=80):
    return [DeviceInfo(f"cuda:{i}", int(f * GiB), total_gib * GiB) for i, f in enumerate(free_gib)]


def test_unequal_gpus_get_workers_in_proportion_to_free_memory():
    inv = gpus(40, 10, 4, 0.5)
    plan = plan_workers(None, MODELS, inv, gpu_mem_fraction=0.9, cpu_count=16)
    # cuda:0: 36 GiB budget -> 9 workers; cuda:1: 9 GiB -> 2; cuda:2: 3.6 GiB -> 0; cuda:3: 0
    assert plan.per_device["cuda:0"]["workers"] == int(40 * 0.9 * GiB // PER_WORKER)
    assert plan.per_device["cuda:1"]["workers"] == int(10 * 0.9 * GiB // PER_WORKER)
    assert "cuda:2" not in plan.per_device and "cuda:3" not in plan.per_device
    assert plan.workers == len(plan.devices) == sum(d["workers"] for d in plan.per_device.values())
    for dev, info in plan.per_device.items():
        assert info["expected_bytes"] <= info["budget_bytes"]


def test_ranks_round_robin_over_devices_with_room():
    plan = plan_workers(4, MODELS, gpus(40, 40, 40, 40), cpu_count=16)
    assert plan.devices == ("cuda:0", "cuda:1", "cuda:2", "cuda:3")
    assert plan.threads_per_worker == 4


def test_np_caps_and_is_reduced_to_what_fits():
    plan = plan_workers(2, MODELS, gpus(40, 40), cpu_count=8)
    assert plan.workers == 2
    small = plan_workers(8, MODELS, gpus(8), cpu_count=8)
    assert small.workers == int(8 * 0.9 * GiB // PER_WORKER) == 1
    assert any("reduced" in n for n in small.notes)


def test_gpu_mem_fraction_caps_the_budget():
    loose = plan_workers(None, MODELS, gpus(40), gpu_mem_fraction=0.9, cpu_count=8)
    tight = plan_workers(None, MODELS, gpus(40), gpu_mem_fraction=0.3, cpu_count=8)
    assert tight.workers == int(40 * 0.3 * GiB // PER_WORKER) < loose.workers


def test_each_gpu_worker_gets_a_memory_cap_that_holds_its_models_and_keeps_the_device_in_budget():
    from djx.core.plan.planner import CUDA_CONTEXT
    inv = gpus(30, 12, total_gib=40)
    plan = plan_workers(None, MODELS, inv, gpu_mem_fraction=0.9, cpu_count=16)
    assert len(plan.mem_fraction) == plan.workers
    for dev in ("cuda:0", "cuda:1"):
        caps = [f * 40 * GiB for f, d in zip(plan.mem_fraction, plan.devices) if d == dev]
        budget = plan.per_device[dev]["budget_bytes"]
        assert all(cap >= 3 * GiB for cap in caps)  # the models fit under each worker's cap
        assert sum(caps) + len(caps) * CUDA_CONTEXT <= budget + 1  # caps + contexts stay in budget
        assert budget - (sum(caps) + len(caps) * CUDA_CONTEXT) < 1e-6 * budget  # and use it all


def test_a_gpu_holds_one_shared_copy_then_as_many_workers_as_their_activations_allow():
    from djx.core.plan.planner import CUDA_CONTEXT
    inv = gpus(30, total_gib=40)
    shared = plan_workers(None, MODELS, inv, gpu_mem_fraction=0.9, cpu_count=16, share_models=True)
    private = plan_workers(None, MODELS, inv, gpu_mem_fraction=0.9, cpu_count=16)
    budget = int(30 * 0.9 * GiB)
    assert shared.workers == (budget - 3 * GiB - CUDA_CONTEXT) // WORKER_OVERHEAD  # 30 workers
    assert private.workers == budget // PER_WORKER  # 7 workers
    info = shared.per_device["cuda:0"]
    assert info["weight_bytes"] == 3 * GiB and info["expected_bytes"] <= info["budget_bytes"]
    caps = [f * 40 * GiB for f in shared.mem_fraction]
    # the workers' caps and contexts, plus the owner's copy and context, stay within the budget
    assert sum(caps) + len(caps) * CUDA_CONTEXT + 3 * GiB + CUDA_CONTEXT <= budget + 1
    assert "weights 3.00 GiB (one shared copy)" in shared.describe()


def test_models_that_do_not_fit_raise_a_clear_error():
    with pytest.raises(RecipeError, match="need .* GiB for one worker.*gpu_mem_fraction"):
        plan_workers(None, MODELS, gpus(3, 2), cpu_count=8)


def test_listed_devices_are_honoured_and_unknown_ones_refused():
    plan = plan_workers(None, MODELS, gpus(40, 40, 40), cpu_count=8, listed_devices=("cuda:2",))
    assert set(plan.devices) == {"cuda:2"}
    with pytest.raises(RecipeError, match="cuda:7.*not visible"):
        plan_workers(None, MODELS, gpus(40), cpu_count=8, listed_devices=("cuda:7",))


def test_cpu_only_machine_splits_threads_so_workers_times_threads_fit_the_cores():
    plan = plan_workers(None, MODELS, [], cpu_count=2)
    assert plan.devices == ("cpu",) and plan.threads_per_worker == 2
    two = plan_workers(2, MODELS, [], cpu_count=2)
    assert two.workers * two.threads_per_worker <= 2
    no_models = plan_workers(None, {}, gpus(40), cpu_count=4)
    assert no_models.workers == 4 and set(no_models.devices) == {"cpu"}


def test_plan_describes_devices_models_and_memory():
    text = plan_workers(3, MODELS, gpus(40, 40), cpu_count=8).describe()
    assert "3 worker(s)" in text and "cuda:0: workers [0, 2]" in text and "cuda:1: workers [1]" in text
    assert "hf_clip:clip:float32" in text and "GiB" in text


FAKE_SMI = """#!/bin/sh
# what nvidia-smi --query-gpu=index,uuid,memory.free,memory.total --format=csv,noheader,nounits prints
cat <<ROWS
0, GPU-aaaa1111-0000, 2048, 81559
1, GPU-bbbb2222-0000, 8192, 81559
2, GPU-cccc3333-0000, 1024, 81559
3, GPU-dddd4444-0000, 4096, 81559
ROWS
"""


@pytest.fixture
def four_gpu_machine(tmp_path, monkeypatch):
    """A machine whose nvidia-smi reports 4 GPUs with 2, 8, 1 and 4 GiB free (no CUDA needed:
    the planner reads the inventory from nvidia-smi, never from a CUDA context)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text(FAKE_SMI)
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    return bin_dir


def test_inventory_honours_cuda_visible_devices_by_index_and_uuid(four_gpu_machine, monkeypatch):
    from djx.core.plan.planner import cuda_inventory
    assert [(d.name, d.free_bytes >> 20) for d in cuda_inventory()] == [
        ("cuda:0", 2048), ("cuda:1", 8192), ("cuda:2", 1024), ("cuda:3", 4096)]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-dddd,1")
    assert [(d.name, d.free_bytes >> 20) for d in cuda_inventory()] == [("cuda:0", 4096), ("cuda:1", 8192)]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,7,0")  # CUDA stops at the first invalid entry
    assert [(d.name, d.free_bytes >> 20) for d in cuda_inventory()] == [("cuda:0", 1024)]


def _dry_run(*args, env=None):
    djx = str(Path(sys.executable).parent / "djx")
    return subprocess.run([djx, "process", str(DEMO), "--dry-run", *args], capture_output=True,
                          text=True, timeout=120, env=env or dict(os.environ))


def test_dry_run_prints_the_gpu_plan_from_free_memory(four_gpu_machine):
    # shared (the default): a GPU holds the one copy and its owner's context, then the workers
    proc = _dry_run("--np", "6")
    assert proc.returncode == 0, proc.stderr
    assert "cuda:0: workers [0]," in proc.stdout and "cuda:1: workers [1, 3, 5]," in proc.stdout
    assert "cuda:3: workers [2, 4]," in proc.stdout and "cuda:2" not in proc.stdout  # 0.9 GiB < 0.5 + 0.75
    assert proc.stdout.count("(one shared copy)") == 3

    proc = _dry_run("--np", "6", "--set", "share_models=false")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("plan: 6 worker(s)")
    # round robin over the devices with room: the 1 GiB GPU holds one worker (2 x 0.75 GiB > 0.9 GiB)
    workers = {ln.split(":")[0].strip() + ":" + ln.split(":")[1]: ln for ln in lines if ln.startswith("  cuda:")}
    assert "workers [0, 4]" in workers["cuda:0"] and "workers [1, 5]" in workers["cuda:1"]
    assert "workers [2]," in workers["cuda:2"] and "workers [3]," in workers["cuda:3"]
    assert all("hf_clip:tiny-clip:float32" in ln and "hf_blip_itm:tiny-blip-itm:float32" in ln
               for ln in workers.values())
    assert "budget" in workers["cuda:1"] and "7.20 GiB budget" in workers["cuda:1"]

    env = dict(os.environ, CUDA_VISIBLE_DEVICES="GPU-dddd,1")
    proc = _dry_run("--np", "6", "--set", "share_models=false", env=env)
    assert proc.returncode == 0, proc.stderr
    assert "cuda:0: workers [0, 2, 4]" in proc.stdout and "cuda:1: workers [1, 3, 5]" in proc.stdout
    assert "cuda:2" not in proc.stdout


def test_dry_run_says_why_when_no_visible_gpu_holds_the_models(four_gpu_machine):
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="2")
    proc = _dry_run("--set", "gpu_mem_fraction=0.5", env=env)
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    assert "for one worker" in proc.stderr and "gpu_mem_fraction 0.5" in proc.stderr
    # listing the CPU in the recipe runs the same recipe without the GPUs
    proc = _dry_run("--set", "devices=[cpu]", env=env)
    assert proc.returncode == 0, proc.stderr
    assert "cpu: workers [0]" in proc.stdout and "cuda" not in proc.stdout
