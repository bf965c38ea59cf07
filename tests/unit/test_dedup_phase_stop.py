"""The dedup phase checks the run's Stop (handed down from Pipeline.run through the ledger) between
records: once SIGTERM asks for a stop it raises Stopped, saying the work is saved; a Stop not asked
for, or none, lets it read on."""
from __future__ import annotations

import json
import signal

import pytest

from djx.core.dedup.phase import _read
from djx.core.recipe.context import POSITION_KEY
from djx.core.run.stop import RUN_SAVED, Stop, Stopped


def test_the_runs_stop_is_asked_between_records(tmp_path):
    part = tmp_path / "kept.part"
    part.write_text("".join(json.dumps({POSITION_KEY: i, "text": "t"}) + "\n" for i in range(3)))
    stop = Stop()
    stop.install()
    try:
        check = lambda: stop.check(RUN_SAVED)  # noqa: E731 (as deduplicate() makes it)
        assert [seen.pos for seen, _, _ in _read(str(part), None, 1, check)] == [0, 1, 2]  # not asked
        stop._on_term(signal.SIGTERM, None)
        with pytest.raises(Stopped, match=f"terminated \\(SIGTERM\\); {RUN_SAVED}"):
            next(_read(str(part), None, 1, check))
    finally:
        stop.uninstall()
    assert len(list(_read(str(part), None, 1, lambda: None))) == 3  # no Stop handed down: read on
