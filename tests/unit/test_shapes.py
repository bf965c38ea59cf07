"""On a GPU the scorer's forwards meet few shapes (ops/common/shapes.py): rows padded to a power of
two from ROWS with copies of the first, texts to a power of two from TOKENS, never past the model's
length; on the CPU nothing changes."""
import torch

from djx.ops.common.shapes import ROWS, TOKENS, pad_inputs, pad_rows, text_length


def test_text_lengths_round_up_on_cuda_only_and_never_past_the_models_length():
    asked = []

    def cap():
        asked.append(1)
        return 77
    assert [text_length(n, cap, "cpu") for n in (1, 17, 77)] == [1, 17, 77] and not asked
    assert [text_length(n, cap, "cuda:0") for n in (1, 16, 17, 33, 64, 65, 77)] == [TOKENS, 16, 32, 64, 64, 77, 77]
    assert {text_length(n, cap, "cuda:0") for n in range(1, 78)} == {16, 32, 64, 77}  # CLIP's four lengths
    assert text_length(0, cap, "cuda:1") == 0


def test_rows_are_padded_with_copies_of_the_first_on_cuda_and_kept_as_they_are_elsewhere():
    rows = torch.arange(5 * 3, dtype=torch.float32).reshape(5, 3)
    assert pad_rows(rows) is rows  # a CPU tensor, no device named: the CPU
    padded = pad_rows(rows, "cuda:0")
    assert padded.shape == (ROWS, 3) and torch.equal(padded[:5], rows)
    assert all(torch.equal(r, rows[0]) for r in padded[5:])
    full = torch.zeros(2 * ROWS, 3)
    assert pad_rows(full, "cuda:0") is full
    assert {pad_rows(torch.zeros(n, 1), "cuda:0").shape[0] for n in range(1, 257)} == {32, 64, 128, 256}
    tokens = pad_inputs({"input_ids": torch.ones(3, 16, dtype=torch.long), "attention_mask": torch.ones(3, 16)}, "cuda")
    assert {k: tuple(v.shape) for k, v in tokens.items()} == {"input_ids": (ROWS, 16), "attention_mask": (ROWS, 16)}
