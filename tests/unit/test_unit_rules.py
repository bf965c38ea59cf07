"""The rules tests/unit/conftest.py holds every unit test to: each way of starting a process, of
sleeping and of starting Ray raises, so a slow test cannot creep into the fast subset."""
import multiprocessing
import os
import subprocess
import sys
import threading
import time

import multiprocess
import pytest

from unit.conftest import NotAUnitTest


@pytest.mark.parametrize("start", [
    lambda: time.sleep(0.01),
    lambda: subprocess.run([sys.executable, "-c", "pass"]),
    lambda: os.fork(),
    lambda: multiprocessing.get_context("fork").Process(target=print).start(),
    lambda: multiprocessing.get_context("spawn").Process(target=print).start(),
    lambda: multiprocess.get_context("fork").Process(target=print).start(),
], ids=["sleep", "subprocess", "fork", "multiprocessing-fork", "multiprocessing-spawn", "multiprocess-fork"])
def test_a_unit_test_cannot_start_a_process_or_sleep(start):
    with pytest.raises(NotAUnitTest, match="belongs in tests/"):
        start()


def test_a_unit_test_cannot_start_ray(ray_module):
    if ray_module is None:
        pytest.skip("Ray is not installed")
    with pytest.raises(NotAUnitTest, match="ray.init"):
        ray_module.init(num_cpus=1)


def test_a_thread_the_test_starts_is_held_to_the_same_rules():
    caught = []

    def body():
        try:
            time.sleep(0.01)
        except NotAUnitTest as e:
            caught.append(e)

    thread = threading.Thread(target=body)
    thread.start()
    thread.join()
    assert len(caught) == 1
