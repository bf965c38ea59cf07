"""The planner counts a local model's parameters from its safetensors headers (no torch import in
the main process); what it cannot read as safetensors falls back to the meta-device count."""
import json
import os
import struct
from pathlib import Path

import pytest

from djx import ModelSpec
from djx.core.models.pool import estimate_bytes
from djx.core.models.weights_header import stored_parameter_count

MODELS = Path(__file__).resolve().parents[1] / "assets" / "models"


@pytest.mark.parametrize("name, cls", [("tiny-clip", "CLIPModel"), ("tiny-blip-itm", "BlipForImageTextRetrieval"),
                                       ("tiny-owlvit", "OwlViTForObjectDetection")])
def test_the_headers_count_what_the_model_built_on_the_meta_device_holds(name, cls):
    import torch
    import transformers
    config = transformers.AutoConfig.from_pretrained(MODELS / name)
    with torch.device("meta"):
        model = getattr(transformers, cls)(config)
    assert stored_parameter_count(str(MODELS / name)) == sum(p.numel() for p in model.parameters())


def _safetensors(path: Path, header: dict, pad: int = 0) -> None:
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + b"\0" * pad)


def test_shards_named_by_the_index_are_summed(tmp_path):
    _safetensors(tmp_path / "a.safetensors", {"w": {"dtype": "F32", "shape": [3, 4], "data_offsets": [0, 48]}}, 48)
    _safetensors(tmp_path / "b.safetensors", {"__metadata__": {"format": "pt"},
                                              "v": {"dtype": "BF16", "shape": [5], "data_offsets": [0, 10]}}, 10)
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(
        {"weight_map": {"w": "a.safetensors", "v": "b.safetensors"}}))
    assert stored_parameter_count(str(tmp_path)) == 17


@pytest.mark.parametrize("case", ["no weights", "index outside", "huge header", "bad shape", "fifo", "not json"])
def test_what_cannot_be_read_as_safetensors_gives_no_count(tmp_path, case):
    weights = tmp_path / "model.safetensors"
    if case == "index outside":
        (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"w": "../x.safetensors"}}))
    elif case == "huge header":
        weights.write_bytes(struct.pack("<Q", 1 << 40) + b"{}")
    elif case == "bad shape":
        _safetensors(weights, {"w": {"dtype": "F32", "shape": [-1, 4], "data_offsets": [0, 0]}})
    elif case == "fifo":
        os.mkfifo(weights)  # never opened for reading: it would block
    elif case == "not json":
        weights.write_bytes(struct.pack("<Q", 4) + b"\xff\xfe{[")
    assert stored_parameter_count(str(tmp_path)) is None


def test_the_clip_estimate_comes_from_the_headers_and_its_dtype():
    from djx.core.op.registry import load_builtin_ops
    load_builtin_ops()  # the model loaders register with the ops
    spec = ModelSpec("hf_clip", str(MODELS / "tiny-clip"), dtype="bfloat16")
    assert estimate_bytes(spec) == int(stored_parameter_count(spec.name) * 2 * 1.1)
