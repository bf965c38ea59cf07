"""What every built-in op that scores with one model of the pool shares: its ModelSpec (kind, the
hub id or folder, dtype, trust_remote_code) and the check of its `forward_batch_size`."""
from __future__ import annotations

from djx import ModelSpec, RecipeError


class OneModelOp:
    """Mixed into a Filter whose model is `model_kind` at `model_name`; the op sets `dtype` and
    `trust_remote_code` (its parameters)."""

    model_kind = ""

    @property
    def model_name(self) -> str:
        """The hub id or folder of the model (the subclass's own parameter, e.g. hf_clip)."""
        raise NotImplementedError

    @property
    def spec(self) -> ModelSpec:
        return ModelSpec(self.model_kind, self.model_name, dtype=self.dtype,
                         trust_remote_code=self.trust_remote_code)

    def model_specs(self) -> list[ModelSpec]:
        return [self.spec]


def check_forward_batch(name: str, forward_batch_size: int | None) -> None:
    if forward_batch_size is not None and forward_batch_size < 1:
        raise RecipeError(f"{name}.forward_batch_size: must be >= 1, got {forward_batch_size}")
