"""A run's outputs may come from someone else: viewing them (`djx explain`, `djx analyze`) must
never import the plug-ins their summary names. Code loads only when the user names it on the
command line (`--custom-ops`, `--recipe`)."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

PLUGIN = '''
from djx import Filter, register_op


@register_op("word_total_filter")
class WordTotalFilter(Filter):
    stats_keys = ("words",)

    def compute_sample(self, sample, batch):
        batch.stats(sample)["words"] = len(batch.text(sample).split())

    def keep(self, stats):
        return stats["words"] >= 2
'''


@pytest.fixture(scope="module")
def received_run(tmp_path_factory):
    """A finished run made with a plug-in (in its own process), whose summary then names a file
    holding someone else's code. -> (export, the file that code would create)"""
    tmp = tmp_path_factory.mktemp("received")
    (tmp / "word_ops.py").write_text(PLUGIN)
    (tmp / "d.jsonl").write_text(json.dumps({"text": "two words"}) + "\n" + json.dumps({"text": "one"}) + "\n")
    (tmp / "r.yaml").write_text(yaml.safe_dump({
        "dataset_path": "d.jsonl", "export_path": "out/o.jsonl", "np": 1, "custom_ops": ["word_ops.py"],
        "process": [{"word_total_filter": {}}]}))
    subprocess.run([sys.executable, "-m", "djx.cli", "process", str(tmp / "r.yaml"), "--quiet"], check=True)
    marker = tmp / "code-ran"
    (tmp / "evil_ops.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    summary = tmp / "out" / "o.summary.json"
    s = json.loads(summary.read_text())
    s["recipe"]["custom_ops"] = [str(tmp / "evil_ops.py")]
    summary.write_text(json.dumps(s))
    return tmp / "out" / "o.jsonl", marker


def test_explain_and_analyze_never_import_plugins_named_by_a_summary(tmp_path, received_run, djx_cli):
    export, marker = received_run
    shown = djx_cli("explain", export, "0")
    assert not marker.exists(), "explain ran code named by the summary"
    assert shown.rc == 0, shown.err
    assert "ops: word_total_filter" in shown.out and "--custom-ops" in shown.out
    assert 'stats: {"words": 2}' in shown.out
    analyzed = djx_cli("analyze", export, "--out", tmp_path / "analysis")
    assert not marker.exists(), "analyze ran code named by the summary"
    assert analyzed.rc == 0, analyzed.err


def test_explain_loads_the_plugins_the_user_names(received_run, djx_cli):
    export, marker = received_run
    shown = djx_cli("explain", export, "0", "--custom-ops", export.parent.parent / "word_ops.py")
    assert shown.rc == 0, shown.err
    assert "op 0 word_total_filter" in shown.out and "passed" in shown.out
    assert not marker.exists()
