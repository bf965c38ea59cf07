"""The Ray driver's start-up: Ray Data's import (0.7 CPU-seconds) is not on the path before ray.init;
it is done in a thread while ray.init waits for the processes it starts, and it is there, with the
datasource the driver reads through, once that thread is joined."""
from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.ray  # where Ray is absent or does not import, conftest skips these tests

PROBE = """
import sys, threading
from djx.core.executors.ray.executor import RayExecutor
print("before", "ray.data" in sys.modules)
from djx.core.executors.ray.cluster import importing_ray_data
seen = []
with importing_ray_data():
    seen = [t.name for t in threading.enumerate()]
print("thread", "djx-import-ray-data" in seen)
print("after", "ray.data" in sys.modules, "djx.core.executors.ray.jsonl_source" in sys.modules)
from djx.core.executors.ray.jsonl_source import JsonLines
from ray.data.datasource import FileBasedDatasource
print("source", issubclass(JsonLines, FileBasedDatasource))
"""


@pytest.mark.slow
def test_the_driver_imports_ray_data_in_a_thread_while_ray_starts():
    # a fresh interpreter: another test of this process may have imported Ray Data already
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split("\n")[:4] == ["before False", "thread True", "after True True", "source True"]
