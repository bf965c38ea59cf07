"""A batch whose images pass max_decoded_bytes together is done in parts: the samples an op
refused as decode_budget run again with nothing held decoded (core/op/images.py counts)."""
from __future__ import annotations

from typing import Callable

from djx.core.op.images import DECODE_BUDGET, BatchImages


def rerun_over_budget(images: BatchImages, rejected: dict, call: Callable[[list], dict], counters: dict,
                      step: int) -> None:
    """The samples an op rejected as decode_budget (`rejected`: index -> (reason, code, error)),
    run again by `call(indices)` (at most `step` at once, the op's batch_size) with nothing held
    decoded (later ops decode again what they read): a batch of photos that together pass
    max_decoded_bytes is done in parts, never rejected for its company. Those that fail again
    together are run one at a time: only a sample whose own images pass the budget stays rejected."""
    pending = [i for i, why in rejected.items() if why[1] == DECODE_BUDGET]
    while pending:
        counters["decode_budget_reruns"] = counters.get("decode_budget_reruns", 0) + len(pending)
        for i in pending:
            del rejected[i]
        if len(pending) > 1:
            for start in range(0, len(pending), step):
                images.close()
                rejected.update(call(pending[start:start + step]))
            again = [i for i in pending if rejected.get(i, ("", ""))[1] == DECODE_BUDGET]
            if len(again) < len(pending):
                pending = again
                continue
            for i in again:
                del rejected[i]
            counters["decode_budget_reruns"] += len(pending)
        for i in pending:  # alone: its own images are all it holds
            images.close()
            rejected.update(call([i]))
        return
