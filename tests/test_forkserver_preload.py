"""A run whose workers fork from a forkserver imports what its model loaders declare
(register_model_loader's `preload`, e.g. transformers' processing code for CLIP and BLIP) once, in
the server, before forking: every worker finds it imported instead of importing it again."""
import json
import os
import subprocess
import sys
import textwrap

import pytest
import yaml

from djx.core.models.pool import ModelSpec, preload_modules
from djx.core.op.registry import load_builtin_ops

pytestmark = pytest.mark.slow

PLUGIN = '''
import os, sys
from djx import Filter, ModelSpec, register_model_loader, register_op

@register_model_loader("probe_table", preload=("djx_preload_probe",))
def load_probe_table(spec, device):
    return {"a": 1.0}

@register_op("preload_probe_filter")
class PreloadProbeFilter(Filter):
    stats_keys = ("probe_preloaded", "probe_pid")

    def model_specs(self):
        return [ModelSpec("probe_table", "t")]

    def compute_stats(self, batch):
        batch.pool.get(ModelSpec("probe_table", "t"))
        for sample in batch.samples:
            batch.stats(sample)["probe_preloaded"] = float("djx_preload_probe" in sys.modules)
            batch.stats(sample)["probe_pid"] = float(os.getpid())

    def keep(self, stats):
        return True
'''


def test_the_forkserver_imports_the_loaders_modules_once_for_every_worker(tmp_path):
    (tmp_path / "plugin.py").write_text(textwrap.dedent(PLUGIN))
    (tmp_path / "djx_preload_probe.py").write_text(
        "import os\nwith open(os.environ['PROBE_FILE'], 'a') as f:\n    f.write(f'{os.getpid()}\\n')\n")
    (tmp_path / "data.jsonl").write_text("".join(json.dumps({"text": f"sample {i}"}) + "\n" for i in range(40)))
    (tmp_path / "recipe.yaml").write_text(yaml.safe_dump(
        {"dataset_path": "data.jsonl", "export_path": "out/o.jsonl", "np": 2, "batch_size": 4,
         "start_method": "forkserver", "custom_ops": ["plugin.py"], "process": [{"preload_probe_filter": {}}]}))
    env = dict(os.environ, PROBE_FILE=str(tmp_path / "imports.txt"),
               PYTHONPATH=os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")])))
    proc = subprocess.run([sys.executable, "-m", "djx.cli", "process", "recipe.yaml", "--quiet"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    importers = (tmp_path / "imports.txt").read_text().split()
    stats = [json.loads(line)["__dj__stats__"] for line in open(tmp_path / "out" / "o.jsonl")]
    workers = {s["probe_pid"] for s in stats}
    assert len(stats) == 40 and len(workers) == 2  # both workers ran
    assert all(s["probe_preloaded"] == 1.0 for s in stats)  # each found it imported...
    assert len(importers) == 1 and float(importers[0]) not in workers  # ...by the one server, before forking


def test_transformers_loaders_declare_their_processing_code_and_others_nothing():
    load_builtin_ops()
    hf = preload_modules([ModelSpec("hf_clip", "c"), ModelSpec("hf_blip_itm", "b"), ModelSpec("hf_clip", "d")])
    assert hf == ("transformers.models.auto.processing_auto",)
    assert preload_modules([ModelSpec("kenlm", "k"), ModelSpec("fasttext", "f")]) == ()
