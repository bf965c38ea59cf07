"""A GPU forward's shapes: few, and each met again.

On a CUDA device a forward pays extra the first time it meets a shape (the kernels' choice, an
attention plan, kernels loaded on first use): on an H100 a group of 32 pairs scored at 66 pairs/s
while its text shape was new, ~0.5 s a new shape, where a known one took 20 ms. The scorer's
groups come in any size and each batch's texts are padded to their longest, so nearly every
forward met a new shape; padding to multiples of 32 rows and 16 tokens still left ~15 text shapes
in a 43-group run, whose forwards took 4x what the same groups took in a probe that had met
them. So on CUDA each forward's rows are padded up to a power of two from ROWS (copies of its first
row) and its texts up to a power of two from TOKENS, never past the model's length: with forwards
of up to 256 rows, CLIP meets at most 4 image shapes and 16 text shapes, each paid once, for at
most twice the work of a forward (the GPU waits on the host far more than that). The padding's
outputs are dropped. Padding changes no row's numbers beyond the kernels' own rounding: rows are
independent, and text padding is masked (and, in CLIP's causal text tower, after the end token
the pooled output reads). On the CPU nothing is padded: the host path stays Data-Juicer's
reference.
"""
from __future__ import annotations

from contextlib import contextmanager

ROWS = 32
TOKENS = 16


def _cuda(device) -> bool:
    return str(device).startswith("cuda")


def _bucket(n: int, least: int) -> int:
    """The smallest power of two times `least` that holds n."""
    size = least
    while size < n:
        size *= 2
    return size


def text_length(longest: int, cap, device) -> int:
    """The length texts whose longest is `longest` are padded to for a forward on `device` (at most
    `cap()`, the model's length, asked only there)."""
    if not _cuda(device) or longest <= 0:
        return longest
    return max(longest, min(cap(), _bucket(longest, TOKENS)))


def pad_rows(tensor, device=None):
    """`tensor` with rows appended (copies of its first) up to a power of two from ROWS, on CUDA; as
    it is elsewhere. The caller keeps the first len(original) outputs."""
    n = tensor.shape[0]
    if not _cuda(device if device is not None else tensor.device) or n == 0 or _bucket(n, ROWS) == n:
        return tensor
    import torch
    return torch.cat([tensor, tensor[:1].expand(_bucket(n, ROWS) - n, *tensor.shape[1:])])


@contextmanager
def attention_without_plans(device):
    """On CUDA, the forwards' attention from flash, memory-efficient or plain kernels, not cuDNN's:
    torch 2.11 sends an attention with a padding mask (CLIP's and BLIP's text towers) to cuDNN
    first on Hopper and newer GPUs, and cuDNN builds an execution plan for every new shape (~0.44 s
    forward, reported on a B200; ~0.5 s a new text shape on an H100 here). torch's own switch
    (`sdpa_kernel`): process-wide while the block runs, restored after; in a scorer only its
    scoring thread runs attention. Elsewhere nothing changes."""
    if not _cuda(device):
        yield
        return
    from torch.nn.attention import SDPBackend, sdpa_kernel
    with sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]):
        yield


def pad_inputs(inputs: dict, device) -> dict:
    """Each tensor of `inputs` (the same rows) padded as pad_rows pads."""
    return {k: pad_rows(v, device) for k, v in inputs.items()}


def pad_tokens(tokenizer, rows: list[list[int]], length: int = 0) -> dict:
    """input_ids and attention_mask of `rows` padded to the longest (or `length` where longer),
    exactly as `tokenizer.pad` pads a list (its pad id, on its padding side), in one tensor call per
    key: the tokenizer's own pad costs a scorer ~0.1 ms a row in Python, every forward."""
    import torch
    pad_id, longest = tokenizer.pad_token_id, max(max(map(len, rows), default=0), length)
    if pad_id is None or tokenizer.padding_side not in ("left", "right"):
        padded = tokenizer.pad({"input_ids": rows}, padding="max_length", max_length=longest,
                               return_tensors="pt")  # it says what is wrong
        return {k: padded[k] for k in ("input_ids", "attention_mask")}
    left = tokenizer.padding_side == "left"
    ids, mask = [], []
    for r in rows:
        fill = longest - len(r)
        ids.append([pad_id] * fill + r if left else r + [pad_id] * fill)
        mask.append([0] * fill + [1] * len(r) if left else [1] * len(r) + [0] * fill)
    return {"input_ids": torch.tensor(ids, dtype=torch.long), "attention_mask": torch.tensor(mask, dtype=torch.long)}
