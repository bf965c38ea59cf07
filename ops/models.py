"""Model loaders for the model pool: Hugging Face CLIP and BLIP image-text matching.

They load with `from_pretrained(name_or_path)`: a hub id and a local folder take the same path.
Each loader also estimates its footprint from the config (parameters x dtype size) before any
weights are read, so the planner can size GPU workers up front.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from djx import DjxError, ModelSpec, register_model_loader
from djx.core.models.dtypes import resolve_dtype
from djx.core.models.weights_header import stored_parameter_count

_DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "auto": 4}  # auto: plan for the larger
_FALLBACK_BYTES = 2 << 30  # when the config cannot be read: plan for 2 GiB


@dataclass
class LoadedModel:
    model: object
    processor: object
    device: str
    dtype: object

    def parameters(self):
        return self.model.parameters()

    def buffers(self):
        return self.model.buffers()


# what loading a transformers model and its processor imports (processing, image processing and
# modelling utilities: ~2 s on one core), for a run's forkserver to import once (pool.preload_modules)
HF_PRELOAD = ("transformers.models.auto.processing_auto",)


def pil_backend() -> dict:
    """The keyword that asks transformers for an image processor's Pillow backend: Data-Juicer's
    numbers (its transformers 4.57 resizes with Pillow). Transformers 5 picks its torchvision
    backend wherever torchvision is installed (a GPU box), whose pixels differ by a level or two
    (a CLIP score by ~5e-4): the same recipe would score differently on a GPU box than on a
    laptop, and `image_decode: device` (Pillow's resize on the GPU) would not match the host."""
    import transformers
    # before 5 a saved Pillow processor loads as such by default; use_fast=False would also pick
    # the slow (pure Python) tokenizer
    return {"backend": "pil"} if int(transformers.__version__.split(".")[0]) >= 5 else {}


def auto_processor(name: str, **kw):
    """transformers.AutoProcessor.from_pretrained(name) with its image processor's Pillow backend."""
    import transformers
    return transformers.AutoProcessor.from_pretrained(name, **kw, **pil_backend())


def _torch_dtype(name: str, device: str):
    """The torch dtype for `name` on `device`; `auto` is bfloat16 only where it is native."""
    import torch
    if name == "auto":
        cap = None
        if device.startswith("cuda"):
            major, minor = torch.cuda.get_device_capability(device)
            cap = major + minor / 10
        name = resolve_dtype(name, device, capability=cap)
    return {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}[name]


def _load(model_cls_name: str, spec: ModelSpec, device: str) -> LoadedModel:
    import transformers
    transformers.utils.logging.disable_progress_bar()  # no per-worker "Loading weights" bars
    model_cls = getattr(transformers, model_cls_name)
    kw = {"revision": spec.revision, "trust_remote_code": spec.trust_remote_code}
    try:
        model = model_cls.from_pretrained(spec.name, **kw)
    except (OSError, ValueError) as e:
        raise cannot_load(model_cls_name, spec, e) from None
    dtype = _torch_dtype(spec.dtype, device)
    model = model.to(device=device, dtype=dtype).eval()
    processor = auto_processor(spec.name, **kw)
    return LoadedModel(model, processor, device, dtype)


def cannot_load(what: str, spec: ModelSpec, e: Exception) -> DjxError:
    """Why `spec` did not load, with what to do: a folder without a model, or a hub id that is
    neither a local folder nor in the cache (and, where the hub may be tried, how to fail at once)."""
    if os.path.isdir(spec.name):
        where = "the folder exists but holds no loadable model"
    else:
        where = ("no such local folder; as a hub id it must be in the local Hugging Face cache" +
                 (" (HF_HUB_OFFLINE is set: it is not tried)" if os.environ.get("HF_HUB_OFFLINE") else
                  " or reachable: set HF_HUB_OFFLINE=1 to fail at once where the hub cannot be reached") +
                 "; or give a local folder saved with save_pretrained")
    return DjxError(f"cannot load {what} from {spec.name!r} ({where}): "
                    f"{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}")


def _estimate(model_cls_name: str):
    def estimate(spec: ModelSpec) -> int:
        stored = stored_parameter_count(spec.name)  # a local folder's safetensors: no torch import
        if stored is not None:
            return int(stored * _DTYPE_BYTES[spec.dtype] * 1.1)
        try:
            import torch
            import transformers
            config = transformers.AutoConfig.from_pretrained(  # planning never waits on the network
                spec.name, revision=spec.revision, trust_remote_code=spec.trust_remote_code, local_files_only=True)
            with torch.device("meta"):
                model = getattr(transformers, model_cls_name)(config)
            n = sum(p.numel() for p in model.parameters())
        except Exception:  # noqa: BLE001  (no config reachable: plan conservatively)
            return _FALLBACK_BYTES
        return int(n * _DTYPE_BYTES[spec.dtype] * 1.1)
    return estimate


@register_model_loader("hf_clip", estimate=_estimate("CLIPModel"), preload=HF_PRELOAD)
def load_clip(spec: ModelSpec, device: str) -> LoadedModel:
    return _load("CLIPModel", spec, device)


@register_model_loader("hf_blip_itm", estimate=_estimate("BlipForImageTextRetrieval"), preload=HF_PRELOAD)
def load_blip_itm(spec: ModelSpec, device: str) -> LoadedModel:
    return _load("BlipForImageTextRetrieval", spec, device)


def load_host_side(spec: ModelSpec) -> tuple:
    """A CLIP or BLIP model's processor and text length, without its weights: what a worker that
    prepares for a scorer elsewhere needs."""
    import transformers
    kw = {"revision": spec.revision, "trust_remote_code": spec.trust_remote_code}
    try:
        processor = auto_processor(spec.name, **kw)
        config = transformers.AutoConfig.from_pretrained(spec.name, **kw)
    except (OSError, ValueError) as e:
        raise DjxError(f"cannot load the processor of {spec.name!r}: {type(e).__name__}: "
                       f"{str(e).splitlines()[0][:300]}") from None
    return processor, int(config.text_config.max_position_embeddings)
