"""ModelPool: one per process. `pool.get(spec)` loads a model once and returns the same object
afterwards, so ops naming the same model share one copy. The pool is bound to one device."""
from __future__ import annotations

import contextlib
import os
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

from djx.core.errors import DjxError, RecipeError
from djx.core.records import WorkerReport
from djx.core.plan.resources import peak_device_bytes, peak_rss_bytes, uss_pss_bytes

_LOADERS: dict[str, Callable] = {}


@dataclass(frozen=True)
class ModelSpec:
    """What to load, hashable: two ops with equal specs share one loaded model."""
    kind: str                      # a registered loader, e.g. "hf_clip"
    name: str                      # hub id or local folder
    revision: str | None = None
    dtype: str = "float32"
    trust_remote_code: bool = False

    def label(self) -> str:
        short = os.path.basename(self.name.rstrip("/")) or self.name
        return f"{self.kind}:{short}:{self.dtype}"


def register_model_loader(kind: str, estimate: Callable[[ModelSpec], int] | None = None, preload: tuple = ()):
    """Register `fn(spec, device) -> model` under `kind`; `estimate(spec)` returns bytes needed;
    `preload`: modules its loading imports (and a worker's processors), which a run's forkserver
    imports once before forking its workers instead of each worker importing them."""

    def deco(fn):
        fn.estimate = estimate
        fn.preload = tuple(preload)
        _LOADERS[kind] = fn
        return fn

    return deco


def preload_modules(specs) -> tuple:
    """The modules the loaders of `specs` declare (register_model_loader's `preload`), once each."""
    out: dict = {}
    for spec in specs:
        loader = _LOADERS.get(spec.kind)
        out.update(dict.fromkeys(getattr(loader, "preload", ())))
    return tuple(out)


def loader_for(spec: ModelSpec) -> Callable:
    """The registered loader of `spec.kind`, or a RecipeError naming the known kinds."""
    loader = _LOADERS.get(spec.kind)
    if loader is None:
        raise RecipeError(f"no model loader registered for kind {spec.kind!r} "
                          f"(known: {', '.join(sorted(_LOADERS)) or 'none'})")
    return loader


def load_said(load: Callable[[ModelSpec], Any], spec: ModelSpec, op_name: str) -> Any:
    """`load(spec)`; a loader's failure (a plug-in's loader raising OSError, a truncated weights
    file) becomes the one line the run stops with, naming the op and the model, wherever the model
    loads: a worker, a device's scorer. djx's own loaders' DjxErrors are said as they are."""
    try:
        return load(spec)
    except DjxError:
        raise
    except Exception as e:  # noqa: BLE001  (any loader's failure: said, and the run stops)
        raise DjxError(f"op {op_name}: its model {spec.name!r} (kind {spec.kind!r}) did not load: "
                       f"{type(e).__name__}: {e}") from None


def estimate_bytes(spec: ModelSpec) -> int:
    """Memory a spec will take on its device, before loading (0 when the loader cannot tell)."""
    loader = _LOADERS.get(spec.kind)
    if loader is None or loader.estimate is None:
        return 0
    return int(loader.estimate(spec))


class ModelPool:
    """Per-process cache of loaded models, keyed by (spec, device). With a `share`, the weights
    are mapped from the run's one shared copy of the device instead of loaded into this process."""

    def __init__(self, device: str = "cpu", share=None, scoring: str = "workers"):
        self.device = device
        self.share = share  # a share.weight_share.WeightShare, or None: load privately
        self.scoring = scoring  # "device": the ops that can, score through the device's scorer
        self._scorer = None  # the client given (use_scorer), else each thread makes its own (its connection)
        self._lane = threading.local()
        self.waiting = contextlib.nullcontext  # what a client wraps its waits in (a worker's lanes: lanes.py)
        self._host: dict = {}  # what this process prepares with (a model's processor), made once
        self.pid = os.getpid()
        self._models: dict[tuple[ModelSpec, str], Any] = {}
        self.loads: dict[str, int] = {}          # spec label -> loads in this process
        self.load_seconds: dict[str, float] = {}
        self.measured_bytes: dict[str, int] = {}
        self.shared_bytes: dict[str, int] = {}   # of those, mapped from the run's shared copy
        self.setup: dict[str, float] = {}  # the process's start-up (WorkerReport.setup)

    def get(self, spec: ModelSpec) -> Any:
        key = (spec, self.device)
        model = self._models.get(key)
        if model is None:
            loader = loader_for(spec)
            t0 = time.perf_counter()
            before = _device_allocated(self.device)
            shared = self.share is not None and self.share.covers(self.device)
            model, shared = self.share.load_mapped(loader, spec, self.device) if shared else \
                (loader(spec, self.device), False)
            label = spec.label()
            self.load_seconds[label] = self.load_seconds.get(label, 0.0) + time.perf_counter() - t0
            self.loads[label] = self.loads.get(label, 0) + 1
            self.measured_bytes[label] = max(_device_allocated(self.device) - before, _param_bytes(model))
            if shared:
                self.shared_bytes[label] = self.measured_bytes[label]
            self._models[key] = model
        return model

    def scorer(self):
        """The device's scorer (a ScoreClient) when the run scores in one place per device and
        this device has one; None: the ops score in this process."""
        if self.scoring != "device":
            return None
        if self._scorer is not None:
            return self._scorer
        client = getattr(self._lane, "scorer", None)
        if client is None:  # one connection per thread: a worker's lanes each have a batch at the scorer
            if self.share is None or self.device not in self.share.owners:
                return None
            from djx.core.models.share.score_client import ScoreClient
            client = self._lane.scorer = ScoreClient(self.share.owners[self.device], self.device,
                                                     waiting=self.waiting)
        return client

    def use_scorer(self, client) -> None:
        """Score through `client` (ScoreClient's interface; e.g. Ray's scoring actors) with scoring: device."""
        self._scorer = client

    def host(self, key, make):
        """`make()`, made once per process (e.g. a model's processor, for preparing without the model)."""
        if key not in self._host:
            self._host[key] = make()
        return self._host[key]

    def report(self, mem=None) -> WorkerReport:
        """This process's report: its device, model loads and footprints, and memory (`mem`: the
        process's PeakUss sampler, sampled now; None: this moment's figures only)."""
        if mem is None:
            uss, pss = uss_pss_bytes()
            peak_uss, peak_pss, peak_rss = uss, pss, peak_rss_bytes()
        else:
            mem.now()
            uss, pss, peak_uss, peak_pss, peak_rss = mem.uss, mem.pss, mem.peak, mem.peak_pss, mem.peak_rss
        return WorkerReport(self.device, dict(self.loads),
                            {k: round(v, 3) for k, v in self.load_seconds.items()},
                            dict(self.measured_bytes), peak_uss, peak_device_bytes(self.device), peak_rss,
                            peak_pss, uss, pss, dict(self.shared_bytes), dict(self.setup))


def _param_bytes(model) -> int:
    total = 0
    for part in (model if isinstance(model, (tuple, list)) else (model,)):
        if not hasattr(part, "parameters") and hasattr(part, "model"):
            part = part.model  # a loader's result that carries the module (e.g. LoadedModel)
        for t in getattr(part, "parameters", lambda: ())():
            total += t.numel() * t.element_size()
        for t in getattr(part, "buffers", lambda: ())():
            total += t.numel() * t.element_size()
    return total


def _device_allocated(device: str) -> int:
    if not device.startswith("cuda"):
        return 0
    import torch
    return int(torch.cuda.memory_allocated(torch.device(device)))


_PROCESS_POOL: ModelPool | None = None


def process_pool(device: str | None = None, share=None, scoring: str = "workers") -> ModelPool:
    """The pool of this process, created on first use (bound to `device`, default cpu; `share`:
    where its weights are mapped from, see ModelPool)."""
    global _PROCESS_POOL
    # a forked worker starts its own pool: models loaded by the parent are not its loads, and a
    # torch model used across fork can hang
    if _PROCESS_POOL is None or _PROCESS_POOL.pid != os.getpid():
        _PROCESS_POOL = ModelPool(device or "cpu", share, scoring)
    else:
        _PROCESS_POOL.scoring = scoring
        if device is not None and device != _PROCESS_POOL.device:
            _PROCESS_POOL.device = device
        if share is not None:
            _PROCESS_POOL.share = share
    return _PROCESS_POOL
