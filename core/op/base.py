"""Op base classes. A Filter computes stats for a batch and keeps or drops each sample from its
stats; a Mapper transforms samples. Parameters are typed keyword arguments, validated on build."""
from __future__ import annotations

from typing import Any, ClassVar

from djx.core.recipe.context import STATS_KEY, RunContext
from djx.core.op.images import BatchImages
from djx.core.errors import RecipeError
from djx.core.op.params import check_ranges, validate_params


class Batch:
    """What one op call sees: the live samples, the run context, the batch's images, the model pool.

    An op marks a sample it cannot process with `reject(i, reason)` (or raises SampleError while
    handling it alone); the other samples of the batch go on.
    """

    def __init__(self, samples: list[dict], ctx: RunContext, images: BatchImages, pool,
                 text_key: str, image_key: str):
        self.samples = samples
        self.ctx = ctx
        self.images = images
        self.pool = pool
        self.text_key = text_key
        self.image_key = image_key
        self.rejected: dict[int, str] = {}
        self.codes: dict[int, str] = {}
        self.counters: dict[str, int] = {}  # summed into the run summary (e.g. oom_retries)

    def __len__(self) -> int:
        return len(self.samples)

    def text(self, sample: dict) -> str:
        return sample[self.text_key]

    def image_refs(self, sample: dict) -> list[str]:
        return sample.get(self.image_key) or []

    def stats(self, sample: dict) -> dict:
        return sample.setdefault(STATS_KEY, {})

    def reject(self, index: int, reason: str, code: str | None = None) -> None:
        """Reject samples[index] with a reason a person understands (and an optional short code)."""
        if index not in self.rejected:
            self.rejected[index] = reason
            if code:
                self.codes[index] = code


class Op:
    """Base of all ops. Subclasses declare typed keyword parameters and call super().__init__(**kw).

    Making an op validates its parameters against those type hints, once, whether a recipe or
    Python code makes it (`__new__` sees the same keywords `__init__` gets). Per-op `text_key`,
    `image_key` and `batch_size` override the recipe's globals.
    """

    name: ClassVar[str] = ""          # set by @register_op
    uses_text: ClassVar[bool] = True  # the chain checks the text key of samples this op sees
    uses_images: ClassVar[bool] = False

    def __new__(cls, *args, **params):
        if args:
            from djx.core.errors import UsageError
            raise UsageError(f"{cls.name or cls.__name__} takes keyword parameters only, e.g. "
                            f"{cls.__name__}(min_len=5)")
        op = super().__new__(cls)
        op._params = validate_params(cls, params, cls.name or cls.__name__)
        check_ranges(cls, op._params, cls.name or cls.__name__)
        return op

    def __init__(self, text_key: str | None = None, image_key: str | None = None,
                 batch_size: int | None = None):
        if batch_size is not None and batch_size < 1:
            raise RecipeError(f"{self.name}.batch_size: must be >= 1, got {batch_size}")
        self.text_key = text_key
        self.image_key = image_key
        self.batch_size = batch_size

    def model_specs(self) -> list:
        """The ModelSpecs this op will ask the pool for; lets the planner size workers up front."""
        return []

    def params(self) -> dict[str, Any]:
        """The op's parameters as given (for plans, summaries and fingerprints)."""
        return dict(self._params)

    def __repr__(self) -> str:
        from djx.core.op.params import shown
        args = ", ".join(f"{k}={shown(v)}" for k, v in self.params().items())
        return f"{self.name or type(self).__name__}({args})"


class Filter(Op):
    """Computes `stats_keys` for every sample of a batch, then keeps or drops each from its stats."""

    stats_keys: ClassVar[tuple[str, ...]] = ()

    def compute_stats(self, batch: Batch) -> None:
        """Write this filter's stats into batch.stats(sample) for each sample."""
        raise NotImplementedError

    def keep(self, stats: dict) -> bool | tuple[bool, str]:
        """True to keep; False, or (False, reason), to drop."""
        raise NotImplementedError


class Mapper(Op):
    """Transforms samples in place (or replaces batch.samples[i])."""

    def process(self, batch: Batch) -> None:
        raise NotImplementedError
