"""Writes the face and subplot filters' test images under tests/assets/faces/ from photos that
scikit-image ships (astronaut: a face; coffee, chelsea, rocket: none), so the tests and CI need
neither scikit-image nor any download. Run once, from the repository root, with scikit-image and
matplotlib installed:

    python tools/make_face_assets.py

The face counts written in tests/assets/faces/README.md are what OpenCV 4's
haarcascade_frontalface_alt.xml finds in the written files (checked when this script runs)."""
from __future__ import annotations

import io
import sys
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageOps

OUT = Path(__file__).resolve().parent.parent / "tests" / "assets" / "faces"
ORIENTATION = 0x0112


def photos() -> dict[str, Image.Image]:
    from skimage import data
    return {name: Image.fromarray(getattr(data, name)()) for name in ("astronaut", "coffee", "chelsea", "rocket")}


def face_images(p: dict[str, Image.Image]) -> dict[str, tuple[Image.Image, int]]:
    """{file name: (image, JPEG quality)}."""
    astro = p["astronaut"]
    small = astro.resize((192, 192), Image.LANCZOS)
    three = Image.new("RGB", (576, 192))
    three.paste(small, (0, 0))
    three.paste(ImageOps.mirror(small), (192, 0))
    three.paste(astro.crop((64, 0, 448, 384)).resize((192, 192), Image.LANCZOS), (384, 0))
    on_coffee = p["coffee"].resize((300, 200), Image.LANCZOS)
    on_coffee.paste(astro.resize((128, 128), Image.LANCZOS), (170, 30))
    return {"astronaut.jpg": (astro.resize((256, 256), Image.LANCZOS), 85),
            "coffee.jpg": (p["coffee"].resize((240, 160), Image.LANCZOS), 80),
            "three_faces.jpg": (three, 75),
            "face_closeup.jpg": (astro.crop((160, 50, 290, 180)).resize((128, 128), Image.LANCZOS), 85),
            "face_on_coffee.jpg": (on_coffee, 80)}


def save_jpeg(img: Image.Image, path: Path, quality: int, orientation: int | None = None) -> None:
    exif = Image.Exif()
    if orientation:
        exif[ORIENTATION] = orientation
    img.save(path, "JPEG", quality=quality, exif=exif.tobytes() if orientation else b"")


def photo_grid(p: dict[str, Image.Image], names: tuple[str, ...], columns: int) -> Image.Image:
    """Photos in a grid of `columns`, each framed in black, on a white page: a figure of panels."""
    rows = -(-len(names) // columns)
    page = Image.new("RGB", (20 + 250 * columns, 20 + 170 * rows), "white")
    draw = ImageDraw.Draw(page)
    for k, name in enumerate(names):
        x, y = 20 + (k % columns) * 250, 20 + (k // columns) * 170
        page.paste(p[name].resize((230, 150), Image.LANCZOS), (x, y))
        draw.rectangle((x - 2, y - 2, x + 231, y + 151), outline="black", width=2)
    return page


def chart_grid() -> Image.Image:
    """A 2x2 matplotlib figure of line plots (axes frames, ticks, curves)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(2, 2, figsize=(6, 4.5), dpi=100)
    x = np.linspace(0, 6.28, 200)
    for k, ax in enumerate(axes.flat):
        ax.plot(x, np.sin(x * (k + 1)), color="C0")
        ax.set_title(f"panel {k + 1}", fontsize=8)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return Image.open(io.BytesIO(buf.getvalue())).convert("RGB")


def count_faces(path: Path) -> int:
    import cv2
    img = ImageOps.exif_transpose(Image.open(path)).convert("RGB")
    grey = cv2.cvtColor(np.asarray(img), cv2.COLOR_RGB2GRAY)
    cascade = cv2.CascadeClassifier(cv2.data.haarcascades + "haarcascade_frontalface_alt.xml")
    return len(cascade.detectMultiScale(grey, scaleFactor=1.1, minNeighbors=3))


def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    p = photos()
    for name, (img, quality) in face_images(p).items():
        save_jpeg(img, OUT / name, quality)
    # stored turned a quarter to the left, with EXIF orientation 6: upright only once decoded as
    # Data-Juicer (and djx) decode it
    save_jpeg(p["astronaut"].resize((256, 256), Image.LANCZOS).transpose(Image.ROTATE_90),
              OUT / "astronaut_exif6.jpg", 85, orientation=6)
    photo_grid(p, ("coffee", "chelsea", "rocket", "astronaut"), 2).save(OUT / "photo_grid.jpg", "JPEG", quality=80)
    photo_grid(p, ("chelsea", "rocket"), 2).save(OUT / "two_panels.jpg", "JPEG", quality=80)
    chart_grid().quantize(64).save(OUT / "chart_grid.png", optimize=True)  # 64 colours: a third the bytes
    for path in sorted(OUT.glob("*.[jp][pn]g")):
        print(f"{path.name}: {path.stat().st_size} bytes, {count_faces(path)} face(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
