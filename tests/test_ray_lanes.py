"""scoring: device on Ray keeps the scoring actor fed: a stage actor that only prepares works on
several batches at once (lanes, as a local worker's), so it prepares its next batches while its
last one is at the scoring actor. Steered by state (a held scorer, a log of prepared batches)."""
from __future__ import annotations

import json

import pytest

from test_scoring_lanes import finish_held_run, start_held_run

pytestmark = [pytest.mark.ray, pytest.mark.slow, pytest.mark.models]


def test_a_ray_stage_actor_prepares_its_next_batches_while_the_scoring_actor_holds_its_last(
        ray_address, tmp_path):
    from djx.core.executors.ray.scorers import LANES
    proc, hold, log = start_held_run(tmp_path, executor="ray", ray_address=ray_address)
    held, summary, every = finish_held_run(tmp_path, proc, hold, log, LANES)
    assert LANES >= 2 and len(held) >= LANES and len({pid for pid, _ in held}) == 1  # one actor, several batches
    assert summary["input"] == 64 and summary["kept"] + summary["dropped"] == 64 and summary["check"]["ok"]
    assert sorted(first for _, first in every) == list(range(0, 64, 8))  # each batch prepared once
    ids = [json.loads(line)["id"] for line in (tmp_path / "out" / "o.jsonl").read_text().splitlines()]
    assert ids == sorted(ids)  # written in input order although batches finished side by side
