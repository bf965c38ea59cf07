"""A GPU forward's shapes: few, and each met again.

On a CUDA device a forward pays extra the first time it meets a shape (the kernels' choice, an
attention plan, kernels loaded on first use). The scorer's groups come in any size, each batch's
texts padded to their longest, so nearly every forward met a new shape: on an H100 a group of 32
pairs scored at 66 pairs/s the first time its shapes were met, and end to end the forwards took
2.5x what the same groups took once their shapes were known. So on CUDA each forward's rows are
padded up to a multiple of ROWS (with copies of its first row) and its texts up to a multiple of
TOKENS (never past the model's length); the padding's outputs are dropped. Padding changes no
row's numbers beyond the kernels' own rounding: rows are independent, and text padding is masked
(and, in CLIP's causal text tower, after the end token the pooled output reads). On the CPU
nothing is padded: the host path stays Data-Juicer's reference.
"""
from __future__ import annotations

ROWS = 32
TOKENS = 16


def _cuda(device) -> bool:
    return str(device).startswith("cuda")


def text_length(longest: int, cap, device) -> int:
    """The length texts whose longest is `longest` are padded to for a forward on `device` (at most
    `cap()`, the model's length, asked only there)."""
    if not _cuda(device) or longest <= 0 or longest % TOKENS == 0:
        return longest
    return max(longest, min(cap(), -(-longest // TOKENS) * TOKENS))


def pad_rows(tensor, device=None):
    """`tensor` with rows appended (copies of its first) up to a multiple of ROWS, on CUDA; as it is
    elsewhere. The caller keeps the first len(original) outputs."""
    if not _cuda(device if device is not None else tensor.device) or tensor.shape[0] % ROWS == 0:
        return tensor
    import torch
    extra = ROWS - tensor.shape[0] % ROWS
    return torch.cat([tensor, tensor[:1].expand(extra, *tensor.shape[1:])])


def pad_inputs(inputs: dict, device) -> dict:
    """Each tensor of `inputs` (the same rows) padded as pad_rows pads."""
    return {k: pad_rows(v, device) for k, v in inputs.items()}
