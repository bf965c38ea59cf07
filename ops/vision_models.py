"""Model loaders for the image-only model filters: Hugging Face image classifiers (NSFW, watermark)
and the LAION aesthetics predictors in shunk031's checkpoint layout.

Both load with `from_pretrained(name_or_path)`, so a hub id and a local folder take the same path,
and estimate their footprint from the config alone (no weights read) for the planner.
"""
from __future__ import annotations

from djx import DjxError, ModelSpec, register_model_loader
from djx.core.models.weights_header import stored_parameter_count
from djx.ops.models import (_DTYPE_BYTES, _FALLBACK_BYTES, HF_PRELOAD, LoadedModel, _torch_dtype, auto_processor,
                            cannot_load)


def _config(spec: ModelSpec, **kw):
    import transformers
    return transformers.AutoConfig.from_pretrained(spec.name, revision=spec.revision,
                                                   trust_remote_code=spec.trust_remote_code, **kw)


def _finish(model, processor, spec: ModelSpec, device: str) -> LoadedModel:
    dtype = _torch_dtype(spec.dtype, device)
    return LoadedModel(model.to(device=device, dtype=dtype).eval(), processor, device, dtype)


def _estimate(build):
    """estimate(spec): parameter bytes of a local folder's safetensors (weights_header.py), else of
    `build(spec)` made on the meta device from the config only (planning never waits on the
    network); 2 GiB when no config is at hand."""
    def estimate(spec: ModelSpec) -> int:
        stored = stored_parameter_count(spec.name)  # a local folder's safetensors: no torch import
        if stored is not None:
            return int(stored * _DTYPE_BYTES[spec.dtype] * 1.1)
        try:
            import torch
            with torch.device("meta"):
                model = build(spec)
            n = sum(p.numel() for p in model.parameters())
        except Exception:  # noqa: BLE001  (no config reachable: plan conservatively)
            return _FALLBACK_BYTES
        return int(n * _DTYPE_BYTES[spec.dtype] * 1.1)
    return estimate


def _classifier_skeleton(spec: ModelSpec):
    import transformers
    config = _config(spec, local_files_only=True)
    return transformers.AutoModelForImageClassification.from_config(
        config, trust_remote_code=spec.trust_remote_code)


@register_model_loader("hf_image_classifier", estimate=_estimate(_classifier_skeleton), preload=HF_PRELOAD)
def load_image_classifier(spec: ModelSpec, device: str) -> LoadedModel:
    """An image-classification model and its image processor (Data-Juicer's AutoProcessor)."""
    import transformers
    transformers.utils.logging.disable_progress_bar()
    kw = {"revision": spec.revision, "trust_remote_code": spec.trust_remote_code}
    try:
        model = transformers.AutoModelForImageClassification.from_pretrained(spec.name, **kw)
        processor = auto_processor(spec.name, **kw)
    except (OSError, ValueError, KeyError) as e:
        raise cannot_load("an image classifier", spec, e) from None
    if model.config.num_labels < 2:
        raise DjxError(f"{spec.name!r} has {model.config.num_labels} label(s); the filter reads the "
                       f"probability of label 1, so the classifier needs two or more")
    return _finish(model, processor, spec, device)


def _predictor_class(spec: ModelSpec, config):
    from djx.ops.aesthetics_model import HEADS, predictor_class
    cls = predictor_class(getattr(config, "architectures", None), spec.name)
    if cls is None:
        raise DjxError(f"{spec.name!r} is not an aesthetics predictor this filter knows: its config names "
                       f"none of {', '.join(HEADS)} and its name says neither 'v1' nor 'v2' with "
                       f"'linear' or 'relu' (as shunk031/aesthetics-predictor-* do)")
    return cls


def _predictor_skeleton(spec: ModelSpec):
    import transformers
    config = transformers.CLIPVisionConfig.from_pretrained(
        spec.name, revision=spec.revision, trust_remote_code=spec.trust_remote_code, local_files_only=True)
    return _predictor_class(spec, config)(config)


def _clip_image_processor_class():
    """CLIP's image processor with the Pillow backend (ops/models.py: pil_backend), asked for by
    name: transformers 5's `CLIPImageProcessorPil`; older transformers' `CLIPImageProcessor` is
    Pillow's."""
    import transformers
    return getattr(transformers, "CLIPImageProcessorPil", None) or transformers.CLIPImageProcessor


@register_model_loader("aesthetics_predictor", estimate=_estimate(_predictor_skeleton), preload=HF_PRELOAD)
def load_aesthetics_predictor(spec: ModelSpec, device: str) -> LoadedModel:
    """A LAION aesthetics predictor (shunk031's layout) and its CLIP image processor."""
    import transformers
    transformers.utils.logging.disable_progress_bar()
    kw = {"revision": spec.revision, "trust_remote_code": spec.trust_remote_code}
    try:
        config = transformers.CLIPVisionConfig.from_pretrained(spec.name, **kw)
        cls = _predictor_class(spec, config)
        model = cls.from_pretrained(spec.name, config=config, **kw)
        processor = _clip_image_processor_class().from_pretrained(spec.name, **kw)
    except (OSError, ValueError, KeyError) as e:
        raise cannot_load("an aesthetics predictor", spec, e) from None
    return _finish(model, processor, spec, device)
