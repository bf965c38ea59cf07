"""SIGTERM before the first batch: reading the recipe, importing its plug-ins, reading its files
and planning write nothing, so a SIGTERM there ends `djx process` at once, in one line, exit 143,
even while a read blocks (here: a plug-in whose import waits on a FIFO no one writes). The test
waits for the plug-in to say it is blocked, never for a time."""
from __future__ import annotations

import os
import signal

import yaml

from helpers import djx, wait_for

BLOCKING_PLUGIN = '''
import pathlib
here = pathlib.Path(__file__).parent
(here / "importing").write_text("")
open(here / "never-written", "rb").read()  # a FIFO: blocks until a writer comes
'''


def test_sigterm_while_a_plugin_import_blocks_ends_the_run_at_once(tmp_path):
    (tmp_path / "slow_ops.py").write_text(BLOCKING_PLUGIN)
    os.mkfifo(tmp_path / "never-written")
    (tmp_path / "d.jsonl").write_text('{"text": "hello there"}\n')
    (tmp_path / "r.yaml").write_text(yaml.safe_dump({
        "dataset_path": "d.jsonl", "export_path": "out/o.jsonl", "custom_ops": ["slow_ops.py"],
        "process": [{"text_length_filter": {"min_len": 1}}]}))
    proc = djx("process", str(tmp_path / "r.yaml"))
    wait_for(lambda: (tmp_path / "importing").exists(), proc, "the plug-in's import")
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err
    assert err.strip().splitlines()[-1] == ("djx: terminated (SIGTERM); nothing was processed or written yet: "
                                            "run the same command again to start")
    assert not (tmp_path / "out").exists()
