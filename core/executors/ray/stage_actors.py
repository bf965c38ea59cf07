"""djx's own stage actors on Ray: created the moment Ray is there, fed by the driver.

Ray Data reads and parses the input (read.py); the op stages run in plain Ray actors that this
module creates right after Ray starts (or is joined), so they load their models while Ray Data
starts its read. Through Ray Data's actor pool a stage actor began its set-up only once Ray Data's
executor had planned and started its pool and the actor's process had imported Ray Data: 2.5-3 s
after Ray was there on 2 cores, all of it on start-up's path (a plain actor: 0.1-0.3 s).

Each parsed block (one batch: read.py re-blocks by batch_size) goes to an actor of the first
stage, whose result (an object reference: it stays in Ray's object store) goes to an actor of the
next, and so on; the driver takes the last stage's results in input order. An actor gets a block
when it has the fewest in work. The blocks in work are bounded by the stages' actors times
`per_actor` (a stage that only prepares: its lanes plus one), summed over the stages: with one
stage, no actor holds more than `per_actor`; with several, an actor of one stage may queue blocks
while those of the next work on theirs.

An actor that dies is restarted by Ray and its calls retried on the new process (max_restarts,
max_task_retries); the poison tracker (poison.py) names what killed it, so the retry isolates the
sample and the run's deaths are bounded by samples, not by Ray's counts."""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Iterator

WAIT_S = 0.2  # a wait for a result is sliced this thin


@dataclass
class StageSpec:
    """One stage's actors: how many, their Ray options and their constructor's arguments."""
    count: int
    options: dict
    kwargs: dict
    per_actor: int = 2  # its share of the blocks in work: per actor (one running, one waiting in its queue)


@dataclass
class _Stage:
    actors: list
    busy: list = field(default_factory=list)  # calls in work per actor
    turn: int = 0                             # which actor goes first among the least busy

    def pick(self) -> int:
        n = len(self.actors)
        k = min(range(n), key=lambda i: (self.busy[i], (i - self.turn) % n))
        self.turn = (k + 1) % n
        self.busy[k] += 1
        return k


class StageActors:
    """The stages' actors of one run; `through` runs blocks through them, `stop` kills them."""

    def __init__(self, ray, cls, specs: list[StageSpec]):
        self._ray = ray
        remote = ray.remote(cls)
        self.stages = [_Stage([remote.options(**spec.options).remote(**spec.kwargs) for _ in range(spec.count)],
                              [0] * spec.count) for spec in specs]
        self.limit = sum(spec.count * spec.per_actor for spec in specs)  # blocks in work at most

    def through(self, blocks) -> Iterator:
        """The last stage's result for each block, in the blocks' order. Closing it closes `blocks`."""
        ray, pending = self._ray, deque()  # (the last stage's result, the actor each stage gave it to)
        try:
            for block in blocks:
                while pending and (len(pending) >= self.limit or ray.wait([pending[0][0]], timeout=0)[0]):
                    yield self._take(pending.popleft())
                ref, picks = block, []
                for stage in self.stages:
                    k = stage.pick()
                    ref = stage.actors[k].run.remote(ref)
                    picks.append(k)
                pending.append((ref, picks))
            while pending:
                yield self._take(pending.popleft())
        finally:
            if hasattr(blocks, "close"):
                blocks.close()

    def _take(self, entry):
        ref, picks = entry
        try:
            # waited for in slices: the thread that pulls results can be stopped between two (node_watch)
            while not self._ray.wait([ref], timeout=WAIT_S)[0]:
                pass
            return self._ray.get(ref)
        finally:
            for stage, k in zip(self.stages, picks):
                stage.busy[k] -= 1

    def stop(self) -> None:
        """Kill every actor (a joined cluster keeps running: nothing of this run stays on it)."""
        for stage in self.stages:
            for actor in stage.actors:
                try:
                    self._ray.kill(actor)
                except Exception:  # noqa: BLE001  already gone with its node or the cluster
                    pass
