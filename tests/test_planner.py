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
    """Placement over GPUs of unequal free memory, as this machine's cores allow (two here: the
    planner never starts more workers than cores; placements of more: tests/unit/test_planner.py)."""
    from djx.core.plan.resources import cpu_count
    # scoring in each worker, shared weights: a GPU holds the one copy and its owner's context,
    # then the workers
    proc = _dry_run("--np", "2", "--set", "scoring=workers")
    assert proc.returncode == 0, proc.stderr
    assert "cuda:0: workers [0]," in proc.stdout and "cuda:1: workers [1]," in proc.stdout
    assert "cuda:2" not in proc.stdout and proc.stdout.count("(one shared copy)") == 2

    proc = _dry_run("--np", "2", "--set", "share_models=false", "--set", "scoring=workers")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("plan: 2 worker(s)")
    workers = {ln.split(":")[0].strip() + ":" + ln.split(":")[1]: ln for ln in lines if ln.startswith("  cuda:")}
    assert "workers [0]," in workers["cuda:0"] and "workers [1]," in workers["cuda:1"]
    assert all("hf_clip:tiny-clip:float32" in ln and "hf_blip_itm:tiny-blip-itm:float32" in ln
               for ln in workers.values())
    assert "budget" in workers["cuda:1"] and "7.20 GiB budget" in workers["cuda:1"]

    # the order CUDA_VISIBLE_DEVICES gives; more workers than cores asked: cut to the cores, said
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="GPU-dddd,1")
    many = cpu_count() + 4
    proc = _dry_run("--np", str(many), "--set", "share_models=false", "--set", "scoring=workers", env=env)
    assert proc.returncode == 0, proc.stderr
    assert "cuda:0: workers [0" in proc.stdout and "cuda:1: workers [1" in proc.stdout
    assert "cuda:2" not in proc.stdout
    assert f"warning: np={many} is more workers than the {cpu_count()} cores" in proc.stdout


@pytest.mark.slow
@pytest.mark.models
def test_dry_run_says_why_when_no_visible_gpu_holds_the_models(four_gpu_machine):
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="2")
    proc = _dry_run("--set", "gpu_mem_fraction=0.5", "--set", "scoring=workers", env=env)
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    assert "for one worker" in proc.stderr and "gpu_mem_fraction 0.5" in proc.stderr
    # listing the CPU in the recipe runs the same recipe without the GPUs
    proc = _dry_run("--set", "devices=[cpu]", env=env)
    assert proc.returncode == 0, proc.stderr
    assert "cpu: workers [0]" in proc.stdout and "cuda" not in proc.stdout


H100_SMI = """#!/bin/sh
cat <<ROWS
0, GPU-eeee5555-0000, 81000, 81559
ROWS
"""


@pytest.fixture
def h100_machine(tmp_path, monkeypatch):
    """A machine whose nvidia-smi reports one 80 GB GPU (no CUDA needed: the planner reads it)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nvidia-smi").write_text(H100_SMI)
    (bin_dir / "nvidia-smi").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)


@pytest.mark.slow
@pytest.mark.models
def test_a_gpu_box_plans_one_worker_per_core_and_scores_on_the_device_by_default(h100_machine):
    """One 80 GB GPU seen from this machine: the default plan starts a worker per core (it made one
    per 768 MiB of GPU memory, 94 here), and scoring: device is the default there, said in the plan."""
    from djx.core.plan.resources import cpu_count
    cores = cpu_count()
    proc = _dry_run("--set", "np=null")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0].startswith(f"plan: {cores} worker(s), 1 torch thread(s) each")
    assert f"cuda:0: workers [{', '.join(map(str, range(cores)))}] prepare (decode, processor, tokenizer); " \
           "1 scorer" in proc.stdout
    assert "note: scoring: device (the default on GPUs)" in proc.stdout
    proc = _dry_run("--set", "np=null", "--set", "scoring=workers")  # each worker scores: still one per core
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0].startswith(f"plan: {cores} worker(s)")
    assert "scoring: device" not in proc.stdout and "prepare (decode" not in proc.stdout


@pytest.mark.slow
@pytest.mark.models
def test_planning_a_gpu_box_reads_the_model_sizes_without_importing_torch(h100_machine):
    """The main process plans from the models' safetensors headers: importing torch and
    transformers there to build each model on the meta device took 11.7 s of an H100 box's
    start-up before any worker could start. The plan is the same as that count gives."""
    code = f"""
import sys
from djx import Pipeline
pipe = Pipeline.from_recipe({str(DEMO)!r})
plan = pipe.plan()
print(sorted(plan.model_bytes.items()), plan.devices[0], "torch" in sys.modules, "transformers" in sys.modules)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    sizes, device, torch_imported, transformers_imported = out.stdout.rsplit(maxsplit=3)
    assert device == "cuda:0" and torch_imported == "False" and transformers_imported == "False"
    assert "hf_clip" in sizes and "hf_blip_itm" in sizes and ", 0)" not in sizes
