"""A sample that kills its worker is rejected like any other: counted at the op that was running,
after the ops it passed, with its image paths written as every record of the outputs has them."""
from __future__ import annotations

import json
from pathlib import Path

PLUGINS = Path(__file__).parent / "plugins"


def test_a_poison_sample_is_counted_per_op_and_its_paths_are_absolute(tmp_path, write_jsonl, write_recipe,
                                                                       djx_cli, make_image, read_jsonl):
    make_image("a.png", (32, 32))
    records = [{"text": f"sample {i} long enough", "images": ["images/a.png"]} for i in range(12)]
    records[5]["poison"] = True
    data = write_jsonl(tmp_path / "d.jsonl", records)
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path=str(data), export_path="out/o.jsonl", np=1,
                          batch_size=4, start_method="fork", custom_ops=[str(PLUGINS / "chaos_ops.py")],
                          process=[{"text_length_filter": {"min_len": 1}}, {"poison_filter": {"how": "kill"}}])
    res = djx_cli("process", recipe, "--quiet")
    assert res.rc == 0, res.err
    summary = json.loads((tmp_path / "out" / "o.summary.json").read_text())
    assert summary["rejected_by_code"] == {"worker_died": 1} and summary["kept"] == 11
    first, poison = summary["ops"]
    assert (first["in"], first["kept"], first["rejected"]) == (12, 12, 0)
    assert (poison["in"], poison["kept"], poison["rejected"]) == (12, 11, 1)
    rejected = read_jsonl(tmp_path / "out" / "o.rejected.jsonl")
    assert rejected[0]["record"]["images"] == [str(tmp_path / "images" / "a.png")]
