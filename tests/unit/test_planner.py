"""The planner sizes workers before any starts: GPU workers from free memory, model footprints and
gpu_mem_fraction; CPU workers with torch threads split so that workers x threads never exceed the
cores (oversubscription ran np=8 on 2 cores at half the speed of np=1)."""
import pytest

from djx import DeviceInfo, RecipeError, plan_workers
from djx.core.plan.planner import CUDA_CONTEXT, WORKER_OVERHEAD

GiB, MiB = 1 << 30, 1 << 20
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


@pytest.mark.parametrize("share_models", [True, False])
def test_a_gpu_box_never_plans_more_workers_than_cores_and_memory_can_only_lower_it(share_models):
    """One 80 GB H100 with 16 cores planned 92 workers (memory alone) and did no batch in minutes."""
    h100 = [DeviceInfo("cuda:0", 80 * GiB, 80 * GiB)]
    plan = plan_workers(None, {"hf_clip:clip:bfloat16": 300 * MiB}, h100, cpu_count=16, share_models=share_models)
    assert plan.workers == 16 and plan.threads_per_worker == 1 and not plan.notes
    big_box = plan_workers(None, {"hf_clip:clip:bfloat16": 300 * MiB}, gpus(*[80] * 8), cpu_count=96,
                           share_models=share_models)
    assert big_box.workers == 96 and all(big_box.devices.count(f"cuda:{i}") == 12 for i in range(8))
    asked = plan_workers(40, {"hf_clip:clip:bfloat16": 300 * MiB}, h100, cpu_count=16, share_models=share_models)
    assert asked.workers == 16 and "warning: np=40 is more workers than the 16 cores" in asked.describe()
    # a GPU nearly full: its memory lowers the count below the cores, and the plan says why
    full = plan_workers(None, {"hf_clip:clip:bfloat16": 300 * MiB}, [DeviceInfo("cuda:0", 3 * GiB, 80 * GiB)],
                        cpu_count=16, share_models=share_models)
    assert 1 <= full.workers < 16
    assert any(f"one worker per core (16) reduced to {full.workers}" in n for n in full.notes)


def test_gpu_mem_fraction_caps_the_budget():
    loose = plan_workers(None, MODELS, gpus(40), gpu_mem_fraction=0.9, cpu_count=8)
    tight = plan_workers(None, MODELS, gpus(40), gpu_mem_fraction=0.3, cpu_count=8)
    assert tight.workers == int(40 * 0.3 * GiB // PER_WORKER) < loose.workers


def test_each_gpu_worker_gets_a_memory_cap_that_holds_its_models_and_keeps_the_device_in_budget():
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
    inv = gpus(30, total_gib=40)  # 64 cores: the memory, not the cores, sets the count here
    shared = plan_workers(None, MODELS, inv, gpu_mem_fraction=0.9, cpu_count=64, share_models=True)
    private = plan_workers(None, MODELS, inv, gpu_mem_fraction=0.9, cpu_count=64)
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
    assert plan.devices == ("cpu", "cpu") and plan.threads_per_worker == 1
    two = plan_workers(2, MODELS, [], cpu_count=2)
    assert two.workers * two.threads_per_worker <= 2
    no_models = plan_workers(None, {}, gpus(40), cpu_count=4)
    assert no_models.workers == 4 and set(no_models.devices) == {"cpu"}


def test_plan_describes_devices_models_and_memory():
    text = plan_workers(3, MODELS, gpus(40, 40), cpu_count=8).describe()
    assert "3 worker(s)" in text and "cuda:0: workers [0, 2]" in text and "cuda:1: workers [1]" in text
    assert "hf_clip:clip:float32" in text and "GiB" in text


@pytest.mark.parametrize("models", [{}, MODELS], ids=["no models", "models"])
@pytest.mark.parametrize("share_models", [False, True], ids=["private", "shared"])
def test_no_plan_runs_more_torch_threads_than_cores(models, share_models):
    for cores in range(1, 17):
        for np in [None, *range(1, 2 * cores + 2)]:
            plan = plan_workers(np, models, [], cpu_count=cores, share_models=share_models)
            assert plan.threads_per_worker >= 1 and len(plan.devices) == plan.workers
            assert plan.workers <= cores and plan.workers * plan.threads_per_worker <= cores, (cores, np)
            if np is not None and np > cores:  # mapped onto the cores, and said so
                assert plan.workers == cores
                assert plan.notes == (f"warning: np={np} is more workers than the {cores} cores: running {cores} "
                                      f"(more processes than cores only slow a run down)",)
                assert plan.notes[0] in plan.describe().splitlines()[-1]
    for np in range(1, 5):  # GPU workers share the host's cores the same way
        gpu_plan = plan_workers(np, MODELS, gpus(40, 40), cpu_count=4, share_models=share_models)
        assert gpu_plan.workers * gpu_plan.threads_per_worker <= 4


def test_cpu_runs_default_to_one_one_thread_worker_per_core():
    """Decode and preprocessing run one core per worker; a worker with two threads left half idle."""
    plan = plan_workers(None, MODELS, [], cpu_count=8)
    assert (plan.workers, plan.threads_per_worker) == (8, 1)
    text_only = plan_workers(None, {}, [], cpu_count=8)
    assert (text_only.workers, text_only.threads_per_worker) == (8, 1)


def test_the_plan_counts_one_weight_copy_per_cpu_device_when_shared():
    models = {"hf_clip:clip:float32": 600 * MiB}
    shared = plan_workers(2, models, [], cpu_count=4, share_models=True)
    private = plan_workers(2, models, [], cpu_count=4, share_models=False)
    assert shared.per_device["cpu"]["expected_bytes"] == 600 * MiB
    assert private.per_device["cpu"]["expected_bytes"] == 2 * 600 * MiB
    assert "weights 600.0 MiB (one shared copy) + about" in shared.describe()
    assert "weights 1.17 GiB (2 private copies)" in private.describe()


def test_scoring_on_the_device_plans_preparing_workers_per_core_spread_over_the_gpus():
    plan = plan_workers(None, {"clip": 1 * GiB}, gpus(40, 40), cpu_count=16, scorer_only=True)
    assert plan.workers == 16 and plan.threads_per_worker == 1 and not plan.mem_fraction
    assert plan.devices.count("cuda:0") == plan.devices.count("cuda:1") == 8
    assert all(info["expected_bytes"] == 1 * GiB + CUDA_CONTEXT for info in plan.per_device.values())
    assert "cuda:0: workers [0, 2, 4, 6, 8, 10, 12, 14] prepare (decode, processor, tokenizer); 1 scorer " \
           "(1 torch thread(s)) holds clip, weights 1.00 GiB" in plan.describe()
    more = plan_workers(20, {"clip": 1 * GiB}, gpus(40), cpu_count=16, scorer_only=True)
    assert more.workers == 20 and more.threads_per_worker == 1 and not more.notes  # they wait on the GPU
    capped = plan_workers(40, {"clip": 1 * GiB}, gpus(40), cpu_count=16, scorer_only=True)
    assert capped.workers == 16 and "warning: np=40" in capped.describe()
    with pytest.raises(RecipeError, match="the models need"):
        plan_workers(None, {"huge": 100 * GiB}, gpus(40), cpu_count=16, scorer_only=True)


def test_scoring_on_the_cpu_plans_a_preparing_worker_per_core_and_says_where_scoring_runs():
    plan = plan_workers(None, {"hf_clip:clip:float32": 600 * MiB}, [], cpu_count=2, scorer_only=True)
    assert plan.workers == 2 and plan.threads_per_worker == 1
    assert plan.per_device["cpu"]["expected_bytes"] == 600 * MiB  # one copy, in the scorer
    assert ("cpu: workers [0, 1] prepare (decode, processor, tokenizer); 1 scorer (1 torch thread(s)) holds "
            "hf_clip:clip:float32, weights 600.0 MiB") in plan.describe()
    assert "warning: np=8" in plan_workers(8, {"m": MiB}, [], cpu_count=2, scorer_only=True).describe()
