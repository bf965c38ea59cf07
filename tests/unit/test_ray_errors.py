"""Ray's errors said in djx's words: a stage actor killed for node memory is one line naming
memory, what to lower and that the run resumes; a remote traceback is its last line, never the
traceback itself."""
from __future__ import annotations

import pytest

from djx.core.executors.ray.cluster import explain

ray_exceptions = pytest.importorskip("ray.exceptions")

RAY_OOM = ("Task was killed due to the node running low on memory.\n"
           "Memory on the node (IP: 10.0.0.5, ID: 4f2c) where the task (actor ID: 9a1b, name=MapWorker("
           "MapBatches(ChainStage)).__init__, pid=4242, memory used=61.2GB) was running was 120.1GB / 126.0GB "
           "(0.953), which exceeds the memory usage threshold of 0.95.\n"
           "Traceback (most recent call last):\n"
           '  File "/site-packages/djx/core/executors/ray/stages.py", line 97, in __call__\n'
           "    res = self._run(spared, sizes)\n")


def test_a_stage_actor_killed_for_node_memory_is_said_in_one_line():
    said = explain(ray_exceptions.OutOfMemoryError(RAY_OOM))
    assert "\n" not in said and "Traceback" not in said and "stages.py" not in said
    assert "memory" in said and "batch_size" in said and "resume" in said


def test_the_same_death_wrapped_in_another_ray_error_is_said_the_same_way():
    said = explain(ray_exceptions.RaySystemError(RAY_OOM))
    assert "\n" not in said and "ran low on memory" in said


def test_a_remote_traceback_is_said_by_its_last_line():
    tb = ("ray::MapWorker.__init__() (pid=1, ip=2)\nTraceback (most recent call last):\n"
          '  File "stages.py", line 3, in f\n    import x\nImportError: cannot import name \'Batch\' from \'djx\'\n')
    assert explain(ray_exceptions.RaySystemError(tb)) == "ImportError: cannot import name 'Batch' from 'djx'"


def test_a_cuda_out_of_memory_is_not_taken_for_the_node_s_memory():
    tb = "Traceback (most recent call last):\n  File \"x.py\", line 1\ntorch.OutOfMemoryError: CUDA out of memory.\n"
    assert explain(ray_exceptions.RaySystemError(tb)) == "torch.OutOfMemoryError: CUDA out of memory."
