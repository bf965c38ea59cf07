"""The end of a run on a local Ray it started: the processes it kills have ended when it returns,
and it does not wait for someone else to reap them."""
from __future__ import annotations

import subprocess
import sys
import threading

import psutil

from djx.core.executors.ray.cluster import _kill

# a parent that starts a child and never reaps it (as the raylet's orphaned workers are left to a
# PID 1 that reaps in its own time, or never)
NEGLECTFUL = ("import subprocess, sys; c = subprocess.Popen(['sleep', '600']); print(c.pid, flush=True); "
              "sys.stdin.read()")


def test_killing_waits_until_the_process_has_died_not_until_it_is_reaped():
    parent = subprocess.Popen([sys.executable, "-c", NEGLECTFUL], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    try:
        child = psutil.Process(int(parent.stdout.readline()))
        assert child.status() != psutil.STATUS_ZOMBIE
        # its timeout far beyond the join's: the wait ends on the child's state, not on the timeout
        killing = threading.Thread(target=_kill, args=([child],), kwargs={"timeout": 600}, daemon=True)
        killing.start()
        killing.join(60)
        assert not killing.is_alive()
        assert child.status() == psutil.STATUS_ZOMBIE  # dead, holding nothing; its parent never reaped it
    finally:
        parent.kill()
        parent.wait()
