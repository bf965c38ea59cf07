"""An input file swapped for a FIFO after the dataset was listed is refused in one line when it is
opened, never waited on (audit D6: open() on a FIFO blocks until a writer comes, forever)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

PROBE = """
import sys
from djx.core.errors import DjxError
from djx.core.io.dataset import _check_json_end
from djx.core.io.readers import ReadState, read_files
try:
    {call}
except DjxError as e:
    print("refused:", e)
"""


@pytest.mark.parametrize("name, call", [
    ("swapped.jsonl", "list(read_files([sys.argv[1]], ReadState(), parse=True))"),
    ("swapped.json", "list(read_files([sys.argv[1]], ReadState(), parse=True))"),
    ("swapped.json", "_check_json_end(sys.argv[1])"),
    ("swapped.jsonl", "from djx.core.io.input_size import measure_input; measure_input([sys.argv[1]])")])
def test_an_input_file_that_is_a_fifo_when_opened_is_refused_not_waited_on(tmp_path, name, call):
    fifo = tmp_path / name
    os.mkfifo(fifo)
    # the timeout only ends a hang (the old behaviour) so that the test fails instead of blocking
    done = subprocess.run([sys.executable, "-c", PROBE.format(call=call), str(fifo)], capture_output=True,
                          text=True, timeout=60)
    assert f"refused: dataset file {fifo} is a FIFO now, not a regular file" in done.stdout, done.stderr
