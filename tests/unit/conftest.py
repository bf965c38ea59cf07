"""tests/unit: pure functions and small objects, milliseconds each: no processes, no Ray, no sleep.

This conftest holds every unit test to that: inside one, starting a process (subprocess, fork,
multiprocessing or multiprocess), time.sleep and ray.init raise NotAUnitTest. A test that needs
one of them belongs in tests/ beside the behaviour files. Threads that were running before the
test (a pool's, a sampler's, from an earlier test in the same session) are left alone.
"""
from __future__ import annotations

import importlib.util
import os
import subprocess
import threading
import time

import multiprocess.process
import multiprocessing.process
import pytest


class NotAUnitTest(AssertionError):
    """A unit test started a process, slept or started Ray."""


@pytest.fixture(scope="session")
def ray_module():
    """The ray module where Ray is installed (imported once per session), else None."""
    if importlib.util.find_spec("ray") is None:
        return None
    import ray
    return ray


@pytest.fixture(autouse=True)
def no_processes_no_ray_no_sleep(monkeypatch, ray_module):
    older = set(threading.enumerate()) - {threading.current_thread()}

    def refuse(what, real):
        def guard(*args, **kwargs):
            if threading.current_thread() in older:
                return real(*args, **kwargs)
            raise NotAUnitTest(f"{what} in a unit test: a test that needs it belongs in tests/, not tests/unit/")
        return guard

    monkeypatch.setattr(time, "sleep", refuse("time.sleep", time.sleep))
    monkeypatch.setattr(os, "fork", refuse("os.fork", os.fork))
    monkeypatch.setattr(subprocess.Popen, "_execute_child",
                        refuse("starting a subprocess", subprocess.Popen._execute_child))
    for module in (multiprocessing.process, multiprocess.process):
        monkeypatch.setattr(module.BaseProcess, "start",
                            refuse(f"starting a {module.__name__.split('.')[0]} process", module.BaseProcess.start))
    if ray_module is not None:
        monkeypatch.setattr(ray_module, "init", refuse("ray.init", ray_module.init))
