"""The handoff of scoring: device between a preparing worker and its device's scorer: prepared
tensors cross in a shared buffer (not through the socket), a larger batch grows the buffer, two
workers' buffers never mix, and a scorer killed and restarted gets the buffer and the op again
from each worker, with the scores a model in the worker's own process gives."""
from __future__ import annotations

import contextlib
import os
import random
import signal
import threading

import pytest
import torch

from djx.core.models.pool import ModelPool
from djx.core.models.share.gpu_owner import WeightOwners
from djx.core.models.share.score_client import ScoreClient
from djx.ops.filter.image_text_model_filter import max_text_len
from djx.tools import synth

from test_prepare_score import OPS, batch_of

pytestmark = [pytest.mark.slow, pytest.mark.models]


def samples_of(folder, n: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        image, cap, _ = synth.random_pair(rng, size=rng.choice([48, 96, 160]))
        image.save(folder / f"{seed}-{i}.png")
        out.append({"text": f"<__dj__image> {cap}", "images": [f"{seed}-{i}.png"]})
    return out


@pytest.fixture
def owner(tmp_path):
    owners = WeightOwners((), str(tmp_path), lambda *a: None, contextlib.nullcontext, threads=1)
    address = owners.start(str(tmp_path), ["cpu"])["cpu"]
    yield owners, address
    owners.stop()


@pytest.mark.parametrize("kind", OPS)
def test_prepared_tensors_cross_in_shared_memory_and_score_as_in_the_worker(tmp_path, owner, kind):
    owners, address = owner
    op, pool = OPS[kind](), ModelPool("cpu")
    loaded = pool.get(op.spec)
    client = ScoreClient(address, "cpu", connect_seconds=60)

    def both(samples):
        prepared, _ = op.prepare(batch_of(samples, tmp_path, pool), loaded.processor, max_text_len(loaded.model))
        with torch.inference_mode():
            here = op.score(loaded, prepared)
        return here, client.score(op, prepared), prepared

    small = samples_of(tmp_path, 3, seed=1)
    here, there, prepared = both(small)
    assert there == pytest.approx(here, abs=1e-6)
    first_size = client._outbox.size
    assert first_size >= prepared.pixels.numel() * prepared.pixels.element_size()  # in the shared buffer
    here, there, prepared = both(samples_of(tmp_path, 12, seed=2))  # four times the images: the buffer grows
    assert there == pytest.approx(here, abs=1e-6)
    assert client._outbox.size > first_size

    # the scorer killed: a new one at the same address gets the buffer and the op from the worker again
    proc = owners.procs["cpu"]
    os.kill(proc.pid, signal.SIGKILL)
    proc.join()
    owners.restart("cpu")
    here, there, _ = both(small)
    assert there == pytest.approx(here, abs=1e-6)


def test_two_workers_buffers_never_mix(tmp_path, owner):
    _, address = owner
    op, pool = OPS["clip"](), ModelPool("cpu")
    loaded = pool.get(op.spec)
    work = []
    for seed in (3, 4):
        prepared, _ = op.prepare(batch_of(samples_of(tmp_path, 4 + seed, seed), tmp_path, pool), loaded.processor,
                                 max_text_len(loaded.model))
        with torch.inference_mode():
            work.append((prepared, op.score(loaded, prepared)))
    got: dict = {}

    def worker(k: int) -> None:
        client = ScoreClient(address, "cpu", connect_seconds=60)
        got[k] = [client.score(op, work[k][0]) for _ in range(6)]  # the scorer joins them at will

    threads = [threading.Thread(target=worker, args=(k,)) for k in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k, (_, want) in enumerate(work):
        assert len(got[k]) == 6
        for scores in got[k]:
            assert scores == pytest.approx(want, abs=1e-6)
