"""The simulated device (tools/simulated_device.py) that the CPU proxies of `scoring: device` rest on
(bench_throughput --only device, bench_scorer, serial_ceiling) prepares what the real op prepares:
with `jpeg_files: true` the files' own bytes, as `image_decode: device` hands them to the device,
and a file that is not a JPEG decoded on the host as that path does."""
from __future__ import annotations

import json
import shutil

import pytest
from PIL import Image

from djx.core.models.pool import ModelPool
from djx.core.op.registry import get_op_class, load_builtin_ops, load_custom_ops
from djx.ops.filter.image_text_model_filter import max_text_len
from conftest import REPO_DIR
from test_prepare_score import batch_of

pytestmark = [pytest.mark.models, pytest.mark.slow]
DEMO = REPO_DIR / "tests" / "assets" / "demo"


def simulated(**kw):
    load_builtin_ops()
    load_custom_ops([str(REPO_DIR / "tools" / "simulated_device.py")])
    return get_op_class("simulated_device_clip_filter")(
        hf_clip=str(REPO_DIR / "tests" / "assets" / "models" / "tiny-clip"), min_score=0.0, **kw)


def test_jpeg_files_are_prepared_as_the_device_decode_prepares_them(tmp_path):
    samples = [json.loads(line) for line in (DEMO / "demo.jsonl").read_text().splitlines()[:6]]
    for s in samples:
        for ref in s["images"]:
            (tmp_path / ref).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(DEMO / ref, tmp_path / ref)
    Image.open(tmp_path / samples[5]["images"][0]).save(tmp_path / "other.png")  # not a JPEG: the host decodes it
    samples[5] = dict(samples[5], images=["other.png"])
    op, pool = simulated(jpeg_files=True), ModelPool("cpu")
    loaded = pool.get(op.spec)
    prepared, plan = op.prepare(batch_of(samples, tmp_path, pool), loaded.processor, max_text_len(loaded.model))
    assert None not in plan
    assert len(prepared.jpegs) == 5 and prepared.pixels.shape[0] == 1 and prepared.n_images == 6
    files = [(tmp_path / s["images"][0]).read_bytes() for s in samples[:5]]
    assert [bytes(t.numpy()) for t in prepared.jpegs] == files
    assert op.score(loaded, prepared) == [0.5] * len(prepared.pairs)

    host, _ = simulated().prepare(batch_of(samples, tmp_path, pool), loaded.processor, max_text_len(loaded.model))
    assert host.jpegs == [] and host.pixels.shape[0] == 6  # without it: the host decodes every image


def test_serial_ceiling_finds_the_scorer_by_its_name_and_counts_each_part(tmp_path):
    from djx.tools.bench_throughput import write_photos, write_recipe
    from djx.tools.serial_ceiling import process_cpu
    data = write_photos(tmp_path / "photos", 40)
    recipe = write_recipe(REPO_DIR / "tests" / "assets" / "models" / "tiny-clip", data, tmp_path / "out", np_=1, devices=["cpu"], scoring="device",
                          seconds_per_pair=0.0, jpeg_files=True)
    cpu = process_cpu(recipe)
    assert set(cpu) == {"main", "scorer", "workers"} and all(v > 0 for v in cpu.values())
    assert json.loads((tmp_path / "out" / "o.summary.json").read_text())["kept"] == 40
