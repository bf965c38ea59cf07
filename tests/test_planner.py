"""The planner on a machine: the GPU inventory from nvidia-smi and the plan `djx process --dry-run`
prints (plan_workers alone, on given inventories: tests/unit/test_planner.py)."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

DEMO = Path(__file__).resolve().parent.parent / "configs" / "demo.yaml"

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


@pytest.mark.slow
@pytest.mark.models
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


@pytest.mark.slow
@pytest.mark.models
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
