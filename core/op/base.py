"""The whole plug-in contract: Op, Filter, Mapper and the Batch they see. Every hook an op may
define is declared here with its default; the framework reads nothing else off an op.

A Filter computes stats (per sample, or for the batch at once) and keeps or drops each sample from
them; a Mapper transforms samples. Parameters are typed keyword arguments, validated on build."""
from __future__ import annotations

import importlib.util
from types import MappingProxyType
from typing import Any, ClassVar, Mapping

from djx.core.recipe.context import STATS_KEY, RunContext
from djx.core.op.images import BatchImages
from djx.core.errors import RecipeError, SampleError, UsageError
from djx.core.op.params import check_ranges, validate_params, with_defaults

LIST_SHAPES = ("per_image", "per_distinct_image", "per_chunk")  # stat_shapes of one value per image or chunk


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
        """The sample's image paths: a list, a single path string read as a list of one."""
        refs = sample.get(self.image_key) or []
        return [refs] if isinstance(refs, str) else refs

    def stats(self, sample: dict) -> dict:
        return sample.setdefault(STATS_KEY, {})

    def waiting(self):
        """A context manager around a wait on something outside this process (a service, a file, a
        device): a worker running several batches at once (scoring: device) computes its other
        batches meanwhile. Without it, an op that waits holds the worker's core all that time."""
        import contextlib
        return getattr(self.pool, "waiting", contextlib.nullcontext)()

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

    name: ClassVar[str] = ""
    """The name recipes use; set by @register_op."""
    uses_text: ClassVar[bool] = True
    """True: the chain rejects a sample without a text string under the text key before this op."""
    uses_images: ClassVar[bool] = False
    """True: the chain checks the image key holds a list of paths, and keeps decoded images for it."""
    path_params: ClassVar[tuple[str, ...]] = ()
    """Parameters naming a local path (a model folder): a recipe's relative value resolves against
    the recipe's folder when it exists there, and stays as given (a hub id) when not."""
    requires: ClassVar[Mapping[str, str]] = MappingProxyType({})
    """Optional packages the op imports (lazily, never at module import): import name -> what to
    install, e.g. {"cv2": "pip install '.[vision]' in djx's checkout"}. Building the op from a recipe fails with that
    line when one is missing: at load, before any worker starts, never mid-run."""

    def __new__(cls, *args, **params):
        if args:
            raise UsageError(f"{cls.name or cls.__name__} takes keyword parameters only, e.g. "
                            f"{cls.__name__}(min_len=5)")
        name = cls.name or cls.__name__
        op = super().__new__(cls)
        op._params = validate_params(cls, params, name)
        check_ranges(cls, op._params, name)
        package = missing_requirement(cls)
        if package:  # with the files it lacks too, in one error (unpickling never gets here: main had it)
            _refuse_missing(name, [package] + cls.missing_resources(with_defaults(cls, op._params)))
        return op

    @classmethod
    def missing_resources(cls, params: dict) -> list[str]:
        """What the op would read and cannot find here, one line each naming the parameter to set
        (`params`: the op's parameters, defaults filled in). Checked when the op is made, beside
        the missing packages, so one error lists all a recipe lacks."""
        return []

    def __init__(self, text_key: str | None = None, image_key: str | None = None,
                 batch_size: int | None = None):
        if batch_size is not None and batch_size < 1:
            raise RecipeError(f"{self.name}.batch_size: must be >= 1, got {batch_size}")
        # here, not in __new__: unpickling an op in a worker calls __new__ without its parameters
        _refuse_missing(self.name or type(self).__name__,
                        type(self).missing_resources(with_defaults(type(self), getattr(self, "_params", {}))))
        self.text_key = text_key
        self.image_key = image_key
        self.batch_size = batch_size

    def model_specs(self) -> list:
        """The ModelSpecs this op will ask the pool for; lets the planner size workers up front."""
        return []

    def notes(self) -> list[str]:
        """What a run should tell the user about this op, once, with its plan (one line each, only
        lines that say what to do): said in the main process, so the op's workers can stay quiet."""
        return []

    def load_resources(self) -> None:
        """Read the files the op needs to compute (word lists, a tokenizer model), once; raise
        RecipeError when one is unusable. A run calls it when it builds the op; the viewers
        (`djx check`, `analyze`, `explain`) never do: their verdicts come from the stats."""

    def params(self) -> dict[str, Any]:
        """The op's parameters as given (for plans, summaries and fingerprints)."""
        return dict(self._params)

    def __repr__(self) -> str:
        from djx.core.op.params import shown
        args = ", ".join(f"{k}={shown(v)}" for k, v in self.params().items())
        return f"{self.name or type(self).__name__}({args})"


class Filter(Op):
    """Computes `stats_keys` for every sample of a batch, then keeps or drops each from its stats.

    Write `compute_sample` (one sample at a time) or `compute_stats` (the whole batch at once, e.g.
    one model forward for all its images), and `keep`.
    """

    stats_keys: ClassVar[tuple[str, ...]] = ()
    """The stats this filter writes; every sample it sees must carry each of them."""
    stat_shapes: ClassVar[Mapping[str, str]] = MappingProxyType({})
    """Per stat, 'scalar', 'per_image', 'per_distinct_image' (a path listed twice: once), 'per_chunk'
    or 'label' (a non-empty string): how a stat the
    input already carries is checked before it is reused (a stat not named here: any finite number or
    list of them)."""
    verdict_params: ClassVar[tuple[str, ...] | None] = None
    """The parameters that choose the verdict from the stats without changing them (thresholds):
    stats djx wrote are reused when only these differ. None: `any_or_all` and every min_*/max_* (and,
    always, a RangeFilter's min_closed_interval, max_closed_interval and reversed_range)."""
    stat_ranges: ClassVar[Mapping[str, tuple[float | None, float | None]]] = MappingProxyType({})
    """Per stat, the (low, high) bounds any value of it can have (None: unbounded), e.g. a length
    is never negative: a stat the input carries outside them is recomputed, never reused."""

    def __new__(cls, *args, **params):
        if cls.compute_stats is Filter.compute_stats and cls.compute_sample is Filter.compute_sample:
            raise UsageError(_no_compute(cls))
        name = cls.name or cls.__name__
        if cls.keep is Filter.keep:
            raise UsageError(f"{name} gives no verdict: a Filter defines keep(stats), returning True to keep the "
                             f"sample, False or (False, reason) to drop it")
        if not cls.stats_keys or isinstance(cls.stats_keys, str):
            raise UsageError(f"{name} names no stats: a Filter sets stats_keys to the names of the stats it "
                             f"writes, e.g. stats_keys = (\"num_words\",) (a tuple, even of one)")
        return super().__new__(cls, *args, **params)

    def compute_sample(self, sample: dict, batch: Batch) -> None:
        """Write this sample's stats into batch.stats(sample); raise SampleError to reject it alone."""
        raise NotImplementedError(_no_compute(type(self)))

    def compute_stats(self, batch: Batch) -> None:
        """Write this filter's stats into batch.stats(sample) for each sample: by default
        compute_sample on each in turn, a SampleError rejecting that sample with its reason and code."""
        for i, sample in enumerate(batch.samples):
            try:
                self.compute_sample(sample, batch)
            except SampleError as e:
                batch.reject(i, str(e), e.code)

    def keep(self, stats: dict) -> bool | tuple[bool, str]:
        """True to keep; False, or (False, reason), to drop."""
        raise NotImplementedError

    def drop_reason(self, stats: dict) -> str | None:
        """Why keep() dropped a sample with these stats (e.g. `text_len=3 below min_len 5`), when
        keep() gave no reason; None: the stats' values are shown instead."""
        return None


class Mapper(Op):
    """Transforms samples in place (or replaces batch.samples[i])."""

    def __new__(cls, *args, **params):
        if cls.process is Mapper.process:
            raise UsageError(f"{cls.name or cls.__name__} transforms nothing: a Mapper defines process(batch), "
                             f"changing batch.samples in place or replacing batch.samples[i]")
        return super().__new__(cls, *args, **params)

    def process(self, batch: Batch) -> None:
        """Transform the batch's samples; one that cannot be transformed: batch.reject(i, reason)."""
        raise NotImplementedError


def _refuse_missing(name: str, missing: list[str]) -> None:
    """Every package and file an op lacks, in one error (a recipe lists each on its own line)."""
    if missing:
        raise RecipeError("; ".join(f"{name}: {m}" for m in missing), items=[f"{name}: {m}" for m in missing])


def missing_requirement(cls: type) -> str | None:
    """'needs the Python package X, which is not installed: <how>' for the first package in the
    op's `requires` that cannot be imported here; None when all can."""
    for module, how in cls.requires.items():
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):  # a parent package missing, or a half-removed module
            found = False
        if not found:
            return f"needs the Python package {module!r}, which is not installed: {how}"
    return None


def _no_compute(cls: type) -> str:
    return (f"{cls.name or cls.__name__} computes no stats: a Filter defines compute_sample(sample, batch) "
            f"(one sample at a time) or compute_stats(batch) (the whole batch at once)")
