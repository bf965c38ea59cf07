"""Plug-in ops from installed packages: the `djx.ops` entry-point group, in the CLI and in workers."""
import json
import os
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.spawn]  # installs a package, runs spawn workers

PLUGIN = '''
from djx import Filter, register_op


@register_op("shouting_filter")
class ShoutingFilter(Filter):
    """Drops samples whose text is all upper case."""

    stats_keys = ("upper_ratio",)

    def __init__(self, max_ratio: float = 0.9, **common):
        super().__init__(**common)
        self.max_ratio = max_ratio

    def compute_stats(self, batch):
        for s in batch.samples:
            letters = [c for c in batch.text(s) if c.isalpha()] or ["a"]
            batch.stats(s)["upper_ratio"] = sum(c.isupper() for c in letters) / len(letters)

    def keep(self, stats):
        return stats["upper_ratio"] <= self.max_ratio
'''


def install_fake_package(site):
    """What `pip install` leaves behind: the module and a dist-info with the entry point."""
    site.mkdir()
    (site / "shout_ops.py").write_text(PLUGIN)
    info = site / "shout_ops-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: shout-ops\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[djx.ops]\nshout = shout_ops\n")


def test_ops_from_an_installed_packages_entry_point_work_in_the_cli_and_spawn_workers(tmp_path):
    site = tmp_path / "site"
    install_fake_package(site)
    env = {**os.environ, "PYTHONPATH": str(site)}
    listed = subprocess.run([sys.executable, "-m", "djx.cli", "ops", "shouting_filter"], env=env,
                            capture_output=True, text=True)
    assert listed.returncode == 0, listed.stderr
    assert "shouting_filter" in listed.stdout and "max_ratio" in listed.stdout

    (tmp_path / "d.jsonl").write_text("".join(json.dumps({"text": t}) + "\n"
                                              for t in ["calm words", "LOUD WORDS", "Mixed Words"] * 4))
    (tmp_path / "r.yaml").write_text("dataset_path: d.jsonl\nexport_path: out/o.jsonl\nnp: 2\n"
                                     "batch_size: 3\nstart_method: spawn\nprocess:\n  - shouting_filter: {}\n")
    run = subprocess.run([sys.executable, "-m", "djx.cli", "process", str(tmp_path / "r.yaml"), "--quiet"],
                         env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    summary = json.loads((tmp_path / "out/o.summary.json").read_text())
    assert (summary["kept"], summary["dropped"], summary["workers"]) == (8, 4, 2)
