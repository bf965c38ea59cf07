"""A stop (Ctrl-C) while a local Ray starts: what the start began so far, a process tree (its GCS,
its raylet and the agents the raylet starts), does not outlive the command. Ray itself is not
needed: a tree of stand-in processes, started the way a raylet starts its agents."""
from __future__ import annotations

import subprocess
import sys
import time

import psutil
import pytest

from helpers import GUARD_S

pytestmark = pytest.mark.slow

# a "raylet" that starts an "agent" that starts a worker of its own, then all wait to be killed
TREE = ("import subprocess, sys, time\n"
        "depth = int(sys.argv[1])\n"
        "if depth: subprocess.Popen([sys.executable, '-c', sys.argv[2], str(depth - 1), sys.argv[2]])\n"
        "time.sleep(3600)\n")


def test_what_a_stopped_local_start_began_is_killed_with_all_it_started():
    from djx.core.executors.ray.cluster import _end_started
    before = set(psutil.Process().children())
    started = subprocess.Popen([sys.executable, "-c", TREE, "2", TREE])
    root = psutil.Process(started.pid)
    deadline = time.monotonic() + GUARD_S
    while len(root.children(recursive=True)) < 2:  # the agent and its worker are up
        assert time.monotonic() < deadline, "the stand-in tree did not start"
        time.sleep(0.01)
    tree = [root, *root.children(recursive=True)]
    _end_started(before)
    started.wait()
    gone, alive = psutil.wait_procs(tree, timeout=GUARD_S)
    assert not [p for p in alive if p.status() != psutil.STATUS_ZOMBIE]
