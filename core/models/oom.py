"""CUDA out-of-memory back-off for model forwards: free the cache and retry at half size, down to
one item; an item that fails even alone is reported, not raised, so only its sample is rejected.

`ctx.fault` can inject OOMs at this exact point ("oom_above:N": a forward of more than N items
fails; "oom_always"), which is how the back-off is tested without a GPU.
"""
from __future__ import annotations

import gc
from typing import Callable, Sequence

OOM_REASON = "CUDA out of memory even for a single pair (batch halved down to 1)"


class _InjectedOOM(RuntimeError):
    pass


def is_oom(e: BaseException) -> bool:
    import torch
    return isinstance(e, (torch.OutOfMemoryError, _InjectedOOM)) or "out of memory" in str(e).lower()


def _inject(fault: Sequence[str], n: int) -> None:
    for f in fault:
        if f == "oom_always" or (f.startswith("oom_above:") and n > int(f.split(":", 1)[1])):
            import torch
            raise torch.OutOfMemoryError(f"CUDA out of memory (injected fault {f}, {n} items)")


def free_cache(device: str) -> None:
    gc.collect()
    if device.startswith("cuda"):
        import torch
        torch.cuda.empty_cache()


def forward_with_backoff(fn: Callable[[list], list], items: list, batch_size: int, device: str,
                         fault: Sequence[str] = (), stats: dict | None = None) -> list:
    """Apply `fn` to `items` in chunks; return one output per item (None where even one OOMed).

    `stats`, when given, counts "oom_retries" and "forwards"."""
    out: list = []
    size = max(1, batch_size)
    i = 0
    while i < len(items):
        chunk = items[i:i + size]
        failed = False
        try:
            _inject(fault, len(chunk))
            res = fn(chunk)
            if stats is not None:
                stats["forwards"] = stats.get("forwards", 0) + 1
        except Exception as e:  # noqa: BLE001  (only OOMs are handled; the rest re-raise)
            if not is_oom(e):
                raise
            failed = True
        if failed:
            # outside the except block: there the exception's traceback still holds the failed
            # forward's frames and their tensors, so the cache could not be given back
            free_cache(device)
            if stats is not None:
                stats["oom_retries"] = stats.get("oom_retries", 0) + 1
            if size == 1:
                out.append(None)
                i += 1
            else:
                size = max(1, size // 2)
            continue
        out.extend(res)
        i += len(chunk)
    return out
