"""The planner sizes GPU workers from free memory, model footprints and gpu_mem_fraction."""
import pytest

from djx import DeviceInfo, RecipeError, plan_workers
from djx.core.planner import WORKER_OVERHEAD

GiB = 1 << 30
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


def test_models_that_do_not_fit_raise_a_clear_error():
    with pytest.raises(RecipeError, match="need .* GiB per worker.*gpu_mem_fraction"):
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
