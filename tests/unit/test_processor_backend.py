"""djx asks transformers for the image processors' Pillow backend (Data-Juicer's pixels): with
torchvision installed (a GPU box) transformers 5 would otherwise pick its torchvision backend, whose
pixels differ by a level or two, and the same recipe would score differently there."""
from pathlib import Path

import transformers

from djx import ModelSpec
from djx.ops.models import load_clip, load_host_side

ASSETS = Path(__file__).resolve().parents[1] / "assets" / "models"


def test_clip_and_blip_load_their_image_processor_with_the_pillow_backend(monkeypatch):
    asked = []
    real = transformers.AutoProcessor.from_pretrained.__func__

    def recording(cls, name, *args, **kw):
        asked.append(kw)
        return real(cls, name, *args, **kw)

    monkeypatch.setattr(transformers.AutoProcessor, "from_pretrained", classmethod(recording))
    processor, _ = load_host_side(ModelSpec("hf_blip_itm", str(ASSETS / "tiny-blip-itm")))
    loaded = load_clip(ModelSpec("hf_clip", str(ASSETS / "tiny-clip")), "cpu")
    pil = {"backend": "pil"} if int(transformers.__version__.split(".")[0]) >= 5 else {}
    assert len(asked) == 2 and all(pil.items() <= kw.items() for kw in asked)
    for proc in (processor, loaded.processor):
        name = type(proc.image_processor).__name__
        assert name.endswith("Pil") or not hasattr(transformers, name + "Pil"), name
        # the tokenizer stays the fast one (Rust): the backend is the image processor's alone
        assert proc.tokenizer.is_fast
