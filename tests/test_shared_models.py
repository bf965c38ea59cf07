"""One copy of each model per machine: local workers map the weights one worker wrote under
/dev/shm, Ray actors read them from the object store; outputs equal those of private copies, and
the shared memory is gone after the run, after Ctrl-C and (at the next run) after kill -9."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from djx import Pipeline
from djx.core.models.share.folder import share_root
from conftest import LONG, REPO_DIR, read_jsonl_file, write_jsonl_file
from helpers import assert_same_run, outputs_by_position as ray_outputs

pytestmark = pytest.mark.models  # every test here loads, builds or plans a model

MODELS = REPO_DIR / "tests" / "assets" / "models"
MiB = 1 << 20


@pytest.fixture(scope="module")
def big_clip(tmp_path_factory) -> Path:
    return build_big_clip(tmp_path_factory.mktemp("big-clip"))


def build_big_clip(folder: Path) -> Path:
    """A CLIP of ~80 MB in float32 with random weights (the tiny CLIP's tokenizer and image size):
    big enough that one copy more or less stands out of a worker's memory. Saved in float16, as
    many hub checkpoints are: loading it in float32 converts, so a private load is a private copy
    (a float32 file loaded as is stays in the page cache, which the kernel already shares)."""
    import torch
    import transformers
    config = transformers.CLIPConfig.from_pretrained(MODELS / "tiny-clip")
    for tower in (config.text_config, config.vision_config):
        tower.hidden_size, tower.intermediate_size, tower.num_hidden_layers = 512, 2048, 3
        tower.num_attention_heads = 8
    config.projection_dim = 256
    torch.manual_seed(0)
    transformers.CLIPModel(config).half().save_pretrained(folder)
    for name in os.listdir(MODELS / "tiny-clip"):
        if name not in ("config.json", "model.safetensors"):
            shutil.copy(MODELS / "tiny-clip" / name, folder / name)
    return folder


def mm_dataset(tmp_path: Path, n: int = 24, poison_at: int | None = None) -> Path:
    from PIL import Image
    colours = ["red", "green", "blue", "yellow"]
    (tmp_path / "images").mkdir(exist_ok=True)
    records = []
    for i in range(n):
        Image.new("RGB", (40 + i, 48), colours[i % 4]).save(tmp_path / "images" / f"{i}.png")
        rec = {"id": i, "text": f"<__dj__image> a {colours[(i // 3) % 4]} square, {LONG}",
               "images": [f"images/{i}.png"]}
        if i == poison_at:
            rec["poison"] = True
        records.append(rec)
    return write_jsonl_file(tmp_path / "data.jsonl", records)


DIE_ONCE = """
import os, signal
from djx import Mapper, register_op

@register_op("die_once_mapper")
class DieOnceMapper(Mapper):
    \"\"\"Kills its worker (SIGKILL) at the sample with id `at`, once per marker file.\"\"\"

    def __init__(self, at: int = 0, marker: str = "", **common):
        super().__init__(**common)
        self.at, self.marker = at, marker

    def process(self, batch):
        if any(s.get("id") == self.at for s in batch.samples) and not os.path.exists(self.marker):
            open(self.marker, "w").close()
            os.kill(os.getpid(), signal.SIGKILL)
"""


def model_ops(clip: Path, die_once: Path | None = None) -> list:
    """The two model filters, between them (die_once: its marker file) an op that kills its worker
    once, after CLIP ran on its batch."""
    return [{"image_text_similarity_filter": {"hf_clip": str(clip), "min_score": -1.0}},  # keeps all
            *([{"die_once_mapper": {"at": 9, "marker": str(die_once)}}] if die_once else []),
            {"image_text_matching_filter": {"hf_blip": str(MODELS / "tiny-blip-itm"), "min_score": 0.5}}]


@pytest.fixture(scope="module")
def die_once_plugin(tmp_path_factory) -> Path:
    """One file for the module: a plug-in op name is registered once per file in this process."""
    plugin = tmp_path_factory.mktemp("plugins") / "die_once.py"
    plugin.write_text(DIE_ONCE)
    return plugin


def run(tmp_path: Path, name: str, data: Path, ops: list, plugin: Path, **keys) -> dict:
    recipe = {"dataset_path": str(data), "export_path": str(tmp_path / name / "out.jsonl"), "np": 2,
              "batch_size": 4, "start_method": "spawn", "process": ops,
              "custom_ops": [str(plugin)], **keys}
    from djx.core.recipe.recipe import recipe_from_dict
    return Pipeline(recipe=recipe_from_dict(recipe, base_dir=str(tmp_path))).run(progress=False, log=lambda *a: None)


def outputs(tmp_path: Path, name: str) -> tuple:
    return tuple(read_jsonl_file(tmp_path / name / f) for f in ("out.jsonl", "out.dropped.jsonl", "out.rejected.jsonl"))


def my_run_folders() -> list[str]:
    root = share_root()
    return [n for n in os.listdir(root) if n.startswith(f"run-{os.getpid()}-")] if os.path.isdir(root) else []


@pytest.mark.slow
@pytest.mark.spawn
def test_workers_map_one_copy_and_score_exactly_as_with_private_copies(tmp_path, big_clip, die_once_plugin):
    data = mm_dataset(tmp_path)
    (tmp_path / "no-death").write_text("")
    shared = run(tmp_path, "shared", data, model_ops(big_clip, die_once=tmp_path / "no-death"), die_once_plugin)
    private = run(tmp_path, "private", data, model_ops(big_clip, die_once=tmp_path / "no-death"), die_once_plugin,
                  share_models=False)
    # bitwise equal stats: the shared copy holds the same tensors, tied weights and buffers included
    assert outputs(tmp_path, "shared") == outputs(tmp_path, "private")
    assert shared["kept"] + shared["dropped"] == 24 and shared["rejected"] == 0
    assert shared["max_model_loads_per_process"] == 1
    mem, mem_private = shared["memory"], private["memory"]
    weights = mem["shared_weight_bytes_per_device"]["cpu"]
    assert weights > 70 * MiB and mem_private["shared_weight_bytes_per_device"] == {}
    # a worker that mapped the weights holds no private copy of them (rank 0 loaded them first, to
    # write the shared copy, and may keep some of the freed heap)
    assert mem["worker_last_uss_bytes"][1] < mem_private["worker_last_uss_bytes"][1] - 0.8 * weights, (mem, mem_private)
    # the two workers together are charged a good part of one copy less than with private copies
    # (not all of it: rank 0's kept heap, up to ~50 MB, and the allocator's noise count too). Both
    # workers' figures are read by the run at its end, at one moment, while both map the copy.
    saved = sum(mem_private["worker_last_pss_bytes"].values()) - sum(mem["worker_last_pss_bytes"].values())
    assert saved > 0.5 * weights, (mem, mem_private)
    # a worker killed mid-run, after its models scored a batch: its replacement maps the same copy
    # and the run completes with the same outputs
    killed = run(tmp_path, "killed", data, model_ops(big_clip, die_once=tmp_path / "died"), die_once_plugin)
    assert (tmp_path / "died").exists() and killed["worker_restarts"] == 1
    assert outputs(tmp_path, "killed") == outputs(tmp_path, "private")
    assert killed["max_model_loads_per_process"] == 1
    assert my_run_folders() == []  # the shared copy is removed at the end of the run


def start_held_run(tmp_path: Path, hold: Path) -> tuple[subprocess.Popen, Path]:
    """`djx process` in its own process group, on a model op then an op that holds every batch
    while `hold` exists; returns it once its shared weights are written (a state, not a time)."""
    import yaml
    hold.write_text("0")
    data = mm_dataset(tmp_path, n=8)
    recipe = tmp_path / "held.yaml"
    recipe.write_text(yaml.safe_dump({
        "dataset_path": str(data), "export_path": str(tmp_path / "held" / "out.jsonl"), "np": 1,
        "batch_size": 4, "custom_ops": [str(REPO_DIR / "tests" / "plugins" / "chaos_ops.py")],
        "process": [{"image_text_similarity_filter": {"hf_clip": str(MODELS / "tiny-clip"), "min_score": -1.0}},
                    {"hold_mapper": {"hold_file": str(hold)}}]}))
    proc = subprocess.Popen([sys.executable, "-m", "djx.cli", "process", str(recipe), "--quiet"],
                            start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            env={**os.environ, "HF_HUB_OFFLINE": "1"})
    root = Path(share_root())
    # the tiny CLIP is a float32 file loaded as float32: mapped from the page cache (a .own marker)
    while not list(root.glob(f"run-{proc.pid}-*/*.skeleton")) + list(root.glob(f"run-{proc.pid}-*/*.own")):
        assert proc.poll() is None, proc.stdout.read().decode()
        time.sleep(0.05)  # polling for the state above
    return proc, next(root.glob(f"run-{proc.pid}-*"))


@pytest.mark.slow
def test_ctrl_c_removes_the_shared_weights(tmp_path):
    proc, folder = start_held_run(tmp_path, tmp_path / "hold")
    os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal does: the whole group
    out = proc.communicate(timeout=120)[0].decode()
    assert proc.returncode == 130, out
    assert not folder.exists()


@pytest.mark.slow
def test_shared_weights_of_a_killed_run_are_removed_by_the_next_run(tmp_path, text_dataset, write_recipe):
    proc, folder = start_held_run(tmp_path, tmp_path / "hold")
    os.killpg(proc.pid, signal.SIGKILL)  # the run and its workers: no chance to clean up
    proc.communicate(timeout=60)
    assert folder.exists()
    recipe = write_recipe(tmp_path / "text.yaml", dataset_path=str(text_dataset.path), np=1,
                          export_path=str(tmp_path / "text" / "out.jsonl"),
                          process=[{"text_length_filter": {"min_len": 3}}])
    Pipeline.from_recipe(str(recipe)).run(progress=False, log=lambda *a: None)
    assert not folder.exists()


@pytest.mark.slow
def test_ray_actors_read_one_copy_from_the_object_store_and_score_as_local(ray_address, tmp_path):
    runs = {}
    for name, keys in {"local": {}, "ray": {"executor": "ray", "np": 2},
                       "ray_private": {"executor": "ray", "np": 2, "share_models": False},
                       "ray_one_actor": {"executor": "ray", "np": 1}}.items():
        pipe = Pipeline.from_recipe(str(REPO_DIR / "configs" / "demo.yaml"),
                                    {"ray_address": ray_address, "export_path": str(tmp_path / name / "kept.jsonl"),
                                     **keys})
        runs[name] = (pipe.run(progress=False, log=lambda *a: None), ray_outputs(tmp_path / name))
    # the same samples with the same scores: the object store's read-only arrays and a private load can
    # take different kernel paths (measured: 1 of the demo's ~100 scores differed, by 1.5e-8)
    assert_same_run({"local": runs["ray_private"], "ray": runs["ray"]})
    assert_same_run(runs)  # what local wrote (up to the last bits of a differently batched forward)
    assert_same_run({"local": runs["local"], "ray": runs["ray_one_actor"]})
    assert runs["ray"][0]["kept"] > 0 and runs["ray"][0]["dropped"] > 0
    # two actors a stage mapped both models from the object store; with share_models: false they did
    # not, nor did one actor a stage (it loads its models itself: nothing to share, and the driver
    # does not load them on start-up's path)
    shared = runs["ray"][0]["memory"]["shared_weight_bytes_per_device"]
    assert shared["cpu"] == runs["local"][0]["memory"]["shared_weight_bytes_per_device"]["cpu"] > 0
    assert runs["ray_private"][0]["memory"]["shared_weight_bytes_per_device"] == {}
    assert runs["ray_one_actor"][0]["memory"]["shared_weight_bytes_per_device"] == {}


class Tied(torch.nn.Module):
    """A module with tied weights and a non-persistent buffer (absent from its state dict)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.emb = torch.nn.Embedding(10, 4)
        self.out = torch.nn.Linear(4, 10, bias=False)
        self.out.weight = self.emb.weight
        self.register_buffer("scale", torch.tensor(2.0), persistent=False)

    def forward(self, ids):
        return self.out(self.emb(ids) * self.scale)


def test_a_shared_copy_keeps_tied_weights_tied_and_non_persistent_buffers(tmp_path):
    from djx.core.models.pool import ModelSpec
    from djx.core.models.share.weight_share import WeightShare
    spec = ModelSpec("test_tied", "tied")
    ids = torch.arange(10)
    want = Tied()(ids)
    share = WeightShare(folder=str(tmp_path))
    writer, mapper = (share.load(lambda s, d: Tied(), spec, "cpu") for _ in range(2))
    for model in (writer, mapper):
        assert model.out.weight is model.emb.weight and float(model.scale) == 2.0
        assert torch.equal(model(ids), want)
    assert len(list(tmp_path.glob("*.pt"))) == 1  # written once, mapped twice


@pytest.mark.slow
def test_a_model_mapped_from_its_own_file_is_not_copied_and_a_converted_one_is(tmp_path):
    """A float32 safetensors file loaded as float32 stays a memory map of the file (the page cache,
    which the kernel shares): no copy under the run folder, every process loads the file itself.
    Loaded as bfloat16 it is converted in memory, so the run folder gets the one shared copy."""
    import djx.ops.models  # noqa: F401  (registers the hf_clip loader)
    from djx.core.models.pool import ModelSpec, loader_for
    from djx.core.models.share.folder import file_backed_fraction
    from djx.core.models.share.weight_share import WeightShare
    pixels = torch.rand(2, 3, 32, 32)
    for dtype, copied in (("float32", False), ("bfloat16", True)):
        folder = tmp_path / dtype
        folder.mkdir(mode=0o700)  # as a run folder is: djx refuses one that others can write
        spec = ModelSpec("hf_clip", str(MODELS / "tiny-clip"), dtype=dtype)
        private = loader_for(spec)(spec, "cpu")
        share = WeightShare(folder=str(folder))
        first, second = (share.load(loader_for(spec), spec, "cpu") for _ in range(2))
        assert bool(list(folder.glob("*.pt"))) == copied and bool(list(folder.glob("*.own"))) != copied
        # a private load is a map of the file only where nothing was converted
        assert file_backed_fraction(private) == (0.0 if copied else pytest.approx(1.0, abs=0.01))
        for model in (first, second):  # either way every process maps a file: its own or the copy
            assert file_backed_fraction(model) > 0.99
            with torch.inference_mode():
                got = model.model.get_image_features(pixel_values=pixels.to(model.dtype))
                want = private.model.get_image_features(pixel_values=pixels.to(private.dtype))
            assert torch.equal(getattr(got, "pooler_output", got), getattr(want, "pooler_output", want))


def test_dry_run_shows_weight_bytes_per_device_and_bytes_per_worker(djx_cli):
    res = djx_cli("process", REPO_DIR / "configs" / "demo.yaml", "--dry-run", "--np", "2")
    line = next(l for l in res.out.splitlines() if l.strip().startswith("cpu: workers [0, 1]"))
    assert "(one shared copy)" in line and "MiB per worker" in line
    res = djx_cli("process", REPO_DIR / "configs" / "demo.yaml", "--dry-run", "--np", "2", "--set", "share_models=false")
    assert "(2 private copies)" in res.out


# -- the weight owner (the GPU way: one process per device serves its tensors by handle) --------

def owner_run(tmp_path: Path, big_clip: Path, plugin: Path, name: str, share: bool,
              kill_owner: bool = False) -> tuple:
    """The two model filters (and an op that kills its worker at id 17, once) through a local
    executor whose CPU workers map their weights from a weight owner process, as GPU workers do;
    with `kill_owner`, the owner is killed (kill -9) once the first batch is back."""
    from djx.core.executors.base import InputBatch
    from djx.core.executors.local.executor import LocalExecutor
    from djx.core.records import Item
    from djx.core.recipe.recipe import recipe_from_dict
    (tmp_path / name).mkdir()
    data = mm_dataset(tmp_path) if not (tmp_path / "data.jsonl").exists() else tmp_path / "data.jsonl"
    ops = model_ops(big_clip)
    ops.insert(1, {"die_once_mapper": {"at": 17, "marker": str(tmp_path / name / "died")}})
    recipe = recipe_from_dict({"dataset_path": str(data), "export_path": str(tmp_path / name / "out.jsonl"),
                               "np": 2, "custom_ops": [str(plugin)], "process": ops}, base_dir=str(tmp_path))
    pipe = Pipeline(recipe=recipe)
    records = read_jsonl_file(data)
    for rec in records:
        rec["images"] = [str(data.parent / p) for p in rec["images"]]
    batches = [InputBatch([Item(i, record=records[i]) for i in range(b, b + 4)]) for b in range(0, 24, 4)]
    logs: list[str] = []
    ex = LocalExecutor(pipe.chain(), pipe.plan(2), "spawn", tuple(recipe.custom_ops), str(tmp_path),
                       share_models=share, owner_on_cpu=True, log=logs.append)
    lines = []
    for result in ex.run(batches):
        lines += result.kept + result.dropped + [r.reason.encode() for r in result.rejected]
        if kill_owner and not ex._owners.restarts and "cpu" in ex._owners.procs:
            owner = ex._owners.procs["cpu"]
            os.kill(owner.pid, signal.SIGKILL)
            owner.join()  # dead: the executor sees its sentinel before its next batch
            kill_owner = False
    return ex, lines, logs


@pytest.mark.slow
@pytest.mark.spawn
def test_a_weight_owner_serves_one_copy_and_recovers_from_its_own_death_and_a_workers(tmp_path, big_clip,
                                                                                     die_once_plugin):
    shared, lines, _ = owner_run(tmp_path, big_clip, die_once_plugin, "owner", True)
    killed, killed_lines, logs = owner_run(tmp_path, big_clip, die_once_plugin, "owner-killed", True, kill_owner=True)
    private, private_lines, _ = owner_run(tmp_path, big_clip, die_once_plugin, "private", False)
    assert len(lines) == 24 and lines == killed_lines == private_lines  # bitwise the same stats, nothing lost
    for ex in (shared, killed):  # a worker died and came back, mapping the owner's copy again
        assert ex.restarts == 1 and all(sum(r.loads.values()) == 2 for r in ex.reports.values())
    assert (tmp_path / "owner" / "died").exists() and (tmp_path / "owner-killed" / "died").exists()
    assert shared._owners.restarts == 0
    assert killed._owners.restarts == 1 and any("weight owner of cpu died" in ln for ln in logs)
    weights = next(iter(shared.reports.values())).shared_bytes
    assert sum(weights.values()) > 70 * MiB and all(r.shared_bytes == weights for r in shared.reports.values())
    assert all(r.shared_bytes == {} for r in private.reports.values())
    # the two workers together are charged about one copy less than with private copies: the
    # owner made the one copy, which they map (a USS would depend on whether the other worker had
    # mapped the pages yet when the report was taken; the PSS of the two together does not)
    saved = sum(r.pss for r in private.reports.values()) - sum(r.pss for r in shared.reports.values())
    assert saved > 0.5 * sum(weights.values()), (shared.reports, private.reports)
    assert shared._owners.procs == {} and killed._owners.procs == {} and my_run_folders() == []
