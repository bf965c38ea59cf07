"""check_installed(): a phase handed no Stop (the dedup phase) asks the one whose handlers are in
place, and only while they are."""
from __future__ import annotations

import signal

import pytest

from djx.core.run.stop import RUN_SAVED, Stop, Stopped, check_installed


def test_the_installed_stop_is_asked_and_an_uninstalled_one_is_not():
    stop = Stop()
    check_installed()  # none installed: nothing to ask
    stop.install()
    try:
        check_installed()  # installed, not requested
        stop._on_term(signal.SIGTERM, None)
        with pytest.raises(Stopped, match=f"terminated \\(SIGTERM\\); {RUN_SAVED}"):
            check_installed()
    finally:
        stop.uninstall()
    check_installed()  # a requested Stop no longer installed is no later run's stop
