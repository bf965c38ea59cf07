"""The driver's batches (core/executors/ray/blocks.py: Ray Data's blocks cut as the local reader
cuts batches) and their dispatch to djx's own stage actors (core/executors/ray/stage_actors.py): blocks go
through every stage in order, the results come back in input order, the blocks in work are bounded
per actor and spread over the actors, and closing the results closes the input.

Ray itself is a small stand-in here (a unit test starts no process); the real actors run in the
Ray tests (test_ray*.py), which all go through this dispatch."""
from __future__ import annotations

import pyarrow as pa
import pytest

from djx.core.executors.ray.blocks import BLOCK_BYTES, BLOCK_ROWS, block_rows, rebatched
from djx.core.executors.ray.stage_actors import StageActors, StageSpec


class _Ref:
    def __init__(self, value, ready=True):
        self.value, self.ready = value, ready


class _Method:
    def __init__(self, actor):
        self.actor = actor

    def remote(self, arg):
        arg = arg.value if isinstance(arg, _Ref) else arg
        self.actor.calls.append(arg)
        if self.actor.name.startswith("s0"):  # a block enters the first stage: one more block in work
            self.actor.fake.in_work += 1
            self.actor.fake.most_in_work = max(self.actor.fake.most_in_work, self.actor.fake.in_work)
        return _Ref(arg + [self.actor.name], ready=not self.actor.slow)


class _Actor:
    def __init__(self, fake, name, slow=False):
        self.fake, self.name, self.slow, self.calls = fake, name, slow, []
        self.run = _Method(self)


class _Remote:
    def __init__(self, fake):
        self.fake = fake

    def options(self, **options):
        self.fake.options.append(options)
        return self

    def remote(self, **kwargs):
        stage = f"s{kwargs['stage']}"
        name = f"{stage}a{sum(1 for a in self.fake.actors if a.name.startswith(stage))}"
        actor = _Actor(self.fake, name, slow=name in self.fake.slow)
        self.fake.actors.append(actor)
        return actor


class FakeRay:
    """What StageActors uses of Ray: remote(cls).options().remote(), wait, get, kill."""

    def __init__(self, slow=()):
        self.actors, self.options, self.killed, self.slow = [], [], [], set(slow)
        self.in_work = self.most_in_work = 0

    def remote(self, cls):
        return _Remote(self)

    def wait(self, refs, timeout=None):
        if timeout:  # a slow actor's result comes while the driver waits for it
            for r in refs:
                r.ready = True
        return [r for r in refs if r.ready], [r for r in refs if not r.ready]

    def get(self, ref):  # the driver takes a block's last result
        self.in_work -= 1
        return ref.value

    def kill(self, actor):
        self.killed.append(actor.name)


def _specs(stages: int, count: int, per_actor: int = 2) -> list:
    return [StageSpec(count, {"num_cpus": 0.5, "max_restarts": -1}, {"stage": s}, per_actor) for s in range(stages)]


def test_every_block_goes_through_every_stage_and_comes_back_in_input_order():
    ray = FakeRay()
    actors = StageActors(ray, object, _specs(stages=3, count=2))
    out = list(actors.through(iter([[k] for k in range(7)])))
    assert [o[0] for o in out] == list(range(7))
    assert all([name[:2] for name in o[1:]] == ["s0", "s1", "s2"] for o in out)
    assert ray.options == [{"num_cpus": 0.5, "max_restarts": -1}] * 6  # two actors per stage, with their options


def test_blocks_in_work_are_bounded_and_spread_over_the_actors():
    ray = FakeRay(slow={"s0a0", "s0a1"})  # nothing is ready before the driver waits for it
    actors = StageActors(ray, object, _specs(stages=1, count=2, per_actor=3))
    out = list(actors.through(iter([[k] for k in range(20)])))
    assert [o[0] for o in out] == list(range(20))
    assert ray.most_in_work <= 2 * 3  # two actors, at most three blocks each
    a0, a1 = (len(a.calls) for a in ray.actors)
    assert a0 + a1 == 20 and abs(a0 - a1) <= 1


def test_with_two_stages_the_first_queues_blocks_while_the_second_works():
    ray = FakeRay(slow={"s0a0", "s1a0"})
    actors = StageActors(ray, object, _specs(stages=2, count=1, per_actor=2))
    out = list(actors.through(iter([[k] for k in range(9)])))
    assert [o[0] for o in out] == list(range(9))
    assert ray.most_in_work == 2 + 2  # blocks in work: two per actor, summed over the stages


def test_closing_the_results_closes_the_input_and_stop_kills_every_actor():
    closed = []

    def blocks():
        try:
            for k in range(100):
                yield [k]
        finally:
            closed.append(True)

    ray = FakeRay()
    actors = StageActors(ray, object, _specs(stages=2, count=2))
    results = actors.through(blocks())
    assert next(results)[0] == 0
    results.close()
    assert closed == [True]
    actors.stop()
    assert sorted(ray.killed) == ["s0a0", "s0a1", "s1a0", "s1a1"]


def test_ray_datas_blocks_are_cut_into_the_local_readers_batches():
    ids = iter(range(1000))
    sizes = [8, 8, 8, 1, 0, 8, 8, 8, 1, 25, 3]  # as Ray Data's re-blocking gave them, and an empty one
    blocks = [pa.table({"id": [next(ids) for _ in range(n)]}) for n in sizes]
    out = list(rebatched(iter(blocks), 8))
    assert [t.num_rows for t in out] == [8] * 9 + [6]
    assert [i for t in out for i in t.column("id").to_pylist()] == list(range(sum(sizes)))


def test_closing_the_batches_closes_ray_datas_iterator():
    closed = []

    def blocks():
        try:
            while True:
                yield pa.table({"id": [1, 2, 3]})
        finally:
            closed.append(True)

    batches = rebatched(blocks(), 8)
    assert next(batches).num_rows == 8
    batches.close()
    assert closed == [True]


def test_ray_data_hands_the_driver_blocks_of_whole_batches_bounded_in_rows_and_bytes(tmp_path):
    """A fetch of a block from Ray Data is slow (~0.1 s on 2 busy cores): a block of one small
    batch capped a text run at ~650 samples/s. Blocks hold whole batches, up to BLOCK_ROWS rows and
    about BLOCK_BYTES of input, whatever the records' size."""
    short = tmp_path / "short.jsonl"
    short.write_text('{"text": "a caption of some forty bytes or so"}\n' * 5000)
    assert block_rows(str(short), 64) == BLOCK_ROWS and block_rows(str(short), 100) == 1000
    assert block_rows(str(short), 4096) == 4096  # one batch is the least
    long = tmp_path / "long.jsonl"
    long.write_text(('{"text": "%s"}\n' % ("x" * 200_000)) * 20)  # ~200 kB records
    rows = block_rows(str(long), 8)
    assert rows % 8 == 0 and 8 <= rows and rows * 200_000 <= BLOCK_BYTES
    pq = pytest.importorskip("pyarrow.parquet")
    import random
    rng = random.Random(1)
    pq.write_table(pa.table({"text": [rng.randbytes(50_000).hex() for _ in range(50)]}), tmp_path / "p.parquet")
    assert block_rows(str(tmp_path / "p.parquet"), 16) * 100_000 <= BLOCK_BYTES
    assert block_rows(str(tmp_path / "missing.jsonl"), 64) == 64  # the read says what is wrong
