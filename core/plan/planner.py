"""Planning: how many workers, on which devices, with how many threads, before any worker starts.

`plan_workers` is a pure function of the device inventory, the models' footprints and the recipe
knobs, so it is unit-tested with injected inventories; `cuda_inventory` reads the real one.
"""
from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass, field

from djx.core.errors import RecipeError

GiB = 1 << 30
WORKER_OVERHEAD = 768 << 20  # CUDA context + activations per GPU worker, beyond the weights
CUDA_CONTEXT = 512 << 20     # of that overhead, what the CUDA context takes outside the allocator
CPU_WORKER_BYTES = 512 << 20  # a CPU worker beyond the weights: interpreter, torch, a batch's activations


@dataclass(frozen=True)
class DeviceInfo:
    name: str          # "cuda:0"
    free_bytes: int
    total_bytes: int


@dataclass(frozen=True)
class Plan:
    workers: int
    devices: tuple[str, ...]             # device of each worker rank
    threads_per_worker: int
    model_bytes: dict = field(default_factory=dict)      # model label -> bytes (one copy)
    per_device: dict = field(default_factory=dict)       # device -> {"workers", "models", "expected_bytes", "budget_bytes"}
    notes: tuple[str, ...] = ()
    mem_fraction: tuple[float, ...] = ()                 # per rank: cap on its device (0: none)

    @property
    def on_gpu(self) -> bool:
        return any(d.startswith("cuda") for d in self.devices)

    @property
    def workers_touch_gpu(self) -> bool:
        """Whether the workers themselves use a GPU (not when they only prepare for its scorer)."""
        return self.on_gpu and not any(info.get("scorer") for info in self.per_device.values())

    def describe(self) -> str:
        lines = [f"plan: {self.workers} worker(s), {self.threads_per_worker} torch thread(s) each"]
        for dev, info in self.per_device.items():
            ranks = [str(r) for r, d in enumerate(self.devices) if d == dev]
            line = f"  {dev}: workers [{', '.join(ranks)}]"
            if info.get("scorer"):  # scoring: device: the workers prepare, the device's scorer scores
                line += (f" prepare (decode, processor, tokenizer); 1 scorer ({self.threads_per_worker} torch "
                         f"thread(s)) holds {', '.join(info['models'])}, weights {_size(info['weight_bytes'])}")
                lines.append(line)
                continue
            if info.get("models"):
                line += f", models per worker: {', '.join(info['models'])}"
            if info.get("weight_bytes"):  # the weights on the device, then what each worker adds
                line += (f", weights {_size(info['weight_bytes'])} ("
                         + ("one shared copy" if info.get("shared") else f"{info['workers']} private copies")
                         + f") + about {_size(info['worker_bytes'])} per worker")
            if info.get("budget_bytes"):  # GPU: what the plan expects against the budget
                line += f", expected {_size(info['expected_bytes'])} of {_size(info['budget_bytes'])} budget"
            lines.append(line)
        lines += [f"  {n}" if n.startswith("warning: ") else f"  note: {n}" for n in self.notes]
        return "\n".join(lines)


def _size(b: int) -> str:
    return f"{b / GiB:.2f} GiB" if b >= GiB else f"{b / (1 << 20):.1f} MiB"


def _plan_cpu(np: int | None, model_bytes: dict[str, int], devices: list[str], cpu_count: int,
              share_models: bool = False) -> Plan:
    """Workers on CPU, never more than the cores (more only slowed runs down: np=8 on 2 cores ran 2x
    slower than np=1), torch threads split so that workers x threads <= cores. Unset np: one
    one-thread worker per core. Two one-thread CLIP workers beat one two-thread worker on the
    machines measured; where the model is light, decode and preprocessing are the cost, and they
    run on one core per worker (one worker with two threads reached 0.34-0.55x of the cores' decode
    limit where two workers reached 0.70-0.97x). Weights cost one copy per device when shared
    (`expected_bytes`), one per worker when not."""
    notes = ()
    if np is None:
        np = cpu_count
    elif np > cpu_count:
        notes = (f"warning: np={np} is more workers than the {cpu_count} cores: running {cpu_count} "
                 f"(more processes than cores only slow a run down)",)
        np = cpu_count
    dev = [d for d in devices if not d.startswith("cuda")] or ["cpu"]
    ranks = tuple(dev[r % len(dev)] for r in range(np))
    weights = sum(model_bytes.values())
    per_device = {}
    for d in dict.fromkeys(ranks):
        copies = 1 if share_models else ranks.count(d)
        per_device[d] = {"workers": ranks.count(d), "models": sorted(model_bytes), "shared": share_models,
                         "weight_bytes": weights * copies, "expected_bytes": weights * copies,
                         "worker_bytes": CPU_WORKER_BYTES}
    return Plan(np, ranks, max(1, cpu_count // np), dict(model_bytes), per_device, notes)


def plan_workers(np: int | None, model_bytes: dict[str, int], inventory: list[DeviceInfo],
                 gpu_mem_fraction: float = 0.9, cpu_count: int = 1,
                 listed_devices: tuple[str, ...] = (), share_models: bool = False,
                 scorer_only: bool = False) -> Plan:
    """Workers and devices for a run.

    With GPUs and models: each worker holds one copy of every model of the chain, so a device
    takes floor(free x fraction / (models + overhead)) workers; with `share_models` a device holds
    one copy (in its weight owner, with its CUDA context) and takes
    floor((free x fraction - models - context) / overhead) workers; `np` caps the total. Rank r goes
    to the r-th device in round-robin order among those with room left. Without GPUs, workers run
    on CPU with torch threads split so that workers x threads <= cores; with `share_models` the
    workers of a CPU device map one copy of the weights. `scorer_only` (scoring: device, and every
    model op scores in its device's scorer): the GPUs hold one copy and one context each, and the
    workers, which only prepare, are planned as on a CPU (one per core) and spread over the GPUs.
    """
    cpu_count = max(1, cpu_count)
    per_worker = sum(model_bytes.values())
    labels = sorted(model_bytes)
    devices = list(listed_devices) or [d.name for d in inventory]
    gpus = [d for d in devices if d.startswith("cuda")]
    if not model_bytes or not gpus:
        plan = _plan_cpu(np, model_bytes, devices, cpu_count, share_models or scorer_only)
        if scorer_only and model_bytes:  # the CPU's scorer: one copy, the workers only prepare
            for info in plan.per_device.values():
                info.update(scorer=True, worker_bytes=CPU_WORKER_BYTES)
        return plan
    info = {d.name: d for d in inventory}
    if scorer_only:
        return _plan_scorers(np, model_bytes, gpus, info, gpu_mem_fraction, cpu_count)
    need = WORKER_OVERHEAD if share_models else per_worker + WORKER_OVERHEAD
    fixed = per_worker + CUDA_CONTEXT if share_models else 0  # the owner's copy and its context
    budgets, capacity = _gpu_budgets(gpus, info, gpu_mem_fraction, fixed, need, model_bytes, share_models)
    total = sum(capacity.values())
    # the cores bound the workers first (each decodes and preprocesses on one; 92 workers on a
    # 16-core GPU box did no batch in two minutes), then the memory can only lower that
    host = _plan_cpu(np, {}, ["cpu"], cpu_count)
    workers = min(host.workers, total)
    notes = list(host.notes)
    if workers < host.workers:
        notes.append(f"{'np=' + str(np) if np is not None else f'one worker per core ({host.workers})'} reduced to "
                     f"{total}: that is all the free GPU memory holds")
    ranks = _round_robin(gpus, capacity, workers)
    copies = {d: 1 if share_models else ranks.count(d) for d in gpus}
    per_device = {d: {"workers": ranks.count(d), "models": labels, "shared": share_models,
                      "weight_bytes": copies[d] * per_worker, "worker_bytes": WORKER_OVERHEAD,
                      "expected_bytes": fixed + ranks.count(d) * need, "budget_bytes": budgets[d]}
                  for d in gpus if ranks.count(d)}
    # each worker's share of its device's budget (less the owner's copy and context, when shared),
    # less its own CUDA context (which the allocator does not count), becomes a hard cap in the
    # worker: the caching allocator raises OOM beyond it, which the back-off handles, and the
    # workers of a device together stay within the budget. Mapped IPC weights are not counted by
    # a worker's allocator, so they are not in its cap.
    fractions = tuple(((budgets[d] - fixed) / ranks.count(d) - CUDA_CONTEXT) / info[d].total_bytes
                      for d in ranks)
    return Plan(workers, tuple(ranks), max(1, cpu_count // workers), dict(model_bytes),
                per_device, tuple(notes), fractions)


def _plan_scorers(np: int | None, model_bytes: dict[str, int], gpus: list[str], info: dict, fraction: float,
                  cpu_count: int) -> Plan:
    """Preparing workers on the cores, ranks spread over the GPUs (each asks its GPU's scorer),
    no CUDA context and no memory cap in them; each GPU's budget holds one copy and a context.
    Unset np: one per core. A worker waits while its batch is at the device, so an `np` up to twice
    the cores is taken as given (the scoring threads are the GPU's, not the cores')."""
    fixed = sum(model_bytes.values()) + CUDA_CONTEXT
    budgets, _ = _gpu_budgets(gpus, info, fraction, fixed, 1, model_bytes, True)
    host = _plan_cpu(np, {}, ["cpu"], cpu_count)
    if np is not None and cpu_count < np <= 2 * cpu_count:
        host = _plan_cpu(np, {}, ["cpu"], np)
    ranks = tuple(gpus[r % len(gpus)] for r in range(host.workers))
    per_device = {d: {"workers": ranks.count(d), "models": sorted(model_bytes), "shared": True, "scorer": True,
                      "weight_bytes": fixed - CUDA_CONTEXT, "worker_bytes": 0, "expected_bytes": fixed,
                      "budget_bytes": budgets[d]} for d in gpus if ranks.count(d)}
    notes = host.notes
    return Plan(host.workers, ranks, 1, dict(model_bytes), per_device, notes)


def _gpu_budgets(gpus: list[str], info: dict, fraction: float, fixed: int, need: int,
                 model_bytes: dict[str, int], share_models: bool) -> tuple[dict, dict]:
    """Each GPU's budget (free memory x fraction) and how many workers it holds; a clear error
    when a listed device is not visible or no device holds one worker."""
    capacity, budgets = {}, {}
    for d in gpus:
        if d not in info:
            raise RecipeError(f"devices: {d!r} is not visible (visible: {', '.join(info) or 'none'}; "
                              f"check CUDA_VISIBLE_DEVICES)")
        budgets[d] = int(info[d].free_bytes * fraction)
        capacity[d] = max(0, budgets[d] - fixed) // need
    if sum(capacity.values()) == 0:
        best = max(budgets.values())
        raise RecipeError(f"the models need {_size(fixed + need)} for one worker "
                          f"({', '.join(f'{k} {_size(v)}' for k, v in model_bytes.items())}, "
                          f"plus {_size(WORKER_OVERHEAD)} overhead"
                          + (f" and a context of {_size(CUDA_CONTEXT)} for the shared copy" if share_models else "")
                          + ") but the largest budget is "
                          f"{_size(best)} (free memory x gpu_mem_fraction {fraction}); "
                          f"free GPU memory, raise gpu_mem_fraction, or use a smaller dtype")
    return budgets, capacity


def _round_robin(gpus: list[str], capacity: dict, workers: int) -> list[str]:
    """Rank r goes to the r-th device in round-robin order among those with room left."""
    left, ranks = dict(capacity), []
    while len(ranks) < workers:
        for d in gpus:
            if left[d] > 0 and len(ranks) < workers:
                ranks.append(d)
                left[d] -= 1
    return ranks


def cuda_inventory() -> list[DeviceInfo]:
    """Visible CUDA devices with free/total memory, read with nvidia-smi (no CUDA context in this
    process, so workers can still be forked or spawned cleanly). Honours CUDA_VISIBLE_DEVICES."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=index,uuid,memory.free,memory.total",
                              "--format=csv,noheader,nounits"], capture_output=True, text=True,
                             timeout=20, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    rows = []
    for line in out.strip().splitlines():
        idx, uuid, free, total = [x.strip() for x in line.split(",")]
        rows.append((idx, uuid, int(free) << 20, int(total) << 20))
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        order = [v.strip() for v in visible.split(",") if v.strip()]
        picked = []
        for v in order:
            match = [r for r in rows if r[0] == v or r[1].startswith(v)]
            if not match:
                break  # CUDA stops enumerating at the first invalid entry
            picked.append(match[0])
        rows = picked
    return [DeviceInfo(f"cuda:{i}", free, total) for i, (_, _, free, total) in enumerate(rows)]
