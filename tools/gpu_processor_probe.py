"""Which CLIP and BLIP image processors transformers gives djx on this machine, and how far their
pixels are from the PIL processors' (Data-Juicer's numbers come from Pillow's resize).

    python tools/gpu_processor_probe.py

With torchvision installed (a GPU box), transformers may pick a torchvision backend for
`AutoProcessor.from_pretrained`; this prints the class it picked for a CLIP and a BLIP processor
saved as djx's users save them, and the max pixel difference (after rescale and normalisation)
from the PIL class on the test photos (tests/assets). No GPU needed; run by tools/gpu_session.sh.
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    import numpy as np
    import transformers
    from PIL import Image

    from djx.tools.gpu_check_decode import PHOTOS
    images = []
    for p in PHOTOS[:24]:
        try:
            with Image.open(p) as im:
                images.append(im.convert("RGB"))
        except OSError:
            continue
    tok_clip = transformers.AutoTokenizer.from_pretrained(REPO / "tests" / "assets" / "models" / "tiny-clip")
    tok_blip = transformers.AutoTokenizer.from_pretrained(REPO / "tests" / "assets" / "models" / "tiny-blip-itm")
    with tempfile.TemporaryDirectory() as tmp:
        for name, proc_cls, img_cls, tok, size in (
                ("CLIP", "CLIPProcessor", "CLIPImageProcessor", tok_clip, None),
                ("BLIP", "BlipProcessor", "BlipImageProcessor", tok_blip, {"height": 384, "width": 384})):
            pil_cls = getattr(transformers, img_cls + "Pil", None) or getattr(transformers, img_cls)
            kw = {"size": size} if size else {}
            folder = Path(tmp) / name
            getattr(transformers, proc_cls)(image_processor=pil_cls(**kw), tokenizer=tok).save_pretrained(folder)
            auto = transformers.AutoProcessor.from_pretrained(folder).image_processor
            pil = pil_cls.from_pretrained(folder)
            a = np.asarray(auto(images, return_tensors="pt")["pixel_values"], dtype=np.float64)
            b = np.asarray(pil(images, return_tensors="pt")["pixel_values"], dtype=np.float64)
            diff = float(np.abs(a - b).max()) if a.shape == b.shape else float("nan")
            print(f"{name}: AutoProcessor gives {type(auto).__name__}; the PIL class is {pil_cls.__name__}; "
                  f"max |auto - PIL| pixel {diff:.3e} over {len(images)} photos (shapes {a.shape} / {b.shape})")


if __name__ == "__main__":
    sys.path.insert(0, str(REPO.parent))
    main()
