"""`image_decode: device`: JPEGs decoded, resized and cropped on the model's GPU (nvJPEG through
torchvision), then rescaled and normalised there with the processor's value table (pixels.py).

The host reads each JPEG file's bytes (through the batch's image access, so paths are checked as
for a decode) and its header (colour space, EXIF orientation), and hands the bytes over instead of
pixels where they are YCbCr or greyscale; other formats, and CMYK JPEGs, are decoded on the host as
usual. On the model's device the bytes are decoded in one batched call, turned upright by their
EXIF orientation (nvJPEG ignores it: torchvision's `apply_exif_orientation` applies to its CPU
decode only), flipped as the op says, resized with the processor's geometry (bicubic, antialiased)
and cropped as it crops, the images of one size together. A JPEG the device decoder refuses is
decoded with Pillow there instead. torchvision is
imported only here, only on this path. The resize is Pillow's bit for bit (pillow_resize.py);
the GPU's JPEG decoder may round a pixel differently from libjpeg, so the numbers are close to
the host path's, not equal: the host path stays the reference (Data-Juicer's numbers).
"""
from __future__ import annotations

import io
from typing import NamedTuple

HOW = ("image_decode: device needs torchvision with its image decoders (pip install the torchvision "
       "release built for this torch) and a visible CUDA device; or use image_decode: cpu")


def problem() -> str | None:
    """What keeps `image_decode: device` from working here, in one line; None when nothing does.
    Checked at the recipe's load without importing torch or torchvision (seconds each, in a main
    process that uses neither): torchvision installed, built for the torch installed, a CUDA device
    visible (nvidia-smi, as the planner sees them). Where the decoding runs, `require` imports them."""
    import importlib.util
    import shutil
    missing = []
    try:
        found = importlib.util.find_spec("torchvision") is not None
    except (ImportError, ValueError) as e:
        found = False
        missing.append(f"torchvision does not import ({type(e).__name__}: {str(e)[:120]})")
    if not found and not missing:
        missing.append("torchvision does not import (ModuleNotFoundError: no module named 'torchvision')")
    if found:
        wanted = _torch_wanted()
        have = _version("torch")
        if wanted and have and wanted != have:
            missing.append(f"torchvision does not import: it is built for torch {wanted}, not this torch {have}")
    if shutil.which("nvidia-smi") is None:  # no tool to ask: torch says
        import torch
        if not torch.cuda.is_available():
            missing.append("no CUDA device is visible (torch.cuda.is_available() is False)")
    else:
        from djx.core.plan.planner import cuda_inventory
        if not cuda_inventory():
            missing.append("no CUDA device is visible (nvidia-smi lists none, or CUDA_VISIBLE_DEVICES hides them)")
    return f"{HOW}: {'; '.join(missing)}" if missing else None


def require(device) -> None:
    """Where the JPEGs are decoded (a device's scorer, or a worker that scores): torchvision's
    decoders imported now (before the first batch) and the device usable; a DjxError saying what
    is missing otherwise, never a traceback from inside torchvision."""
    from djx.core.errors import DjxError
    try:
        from torchvision.io import decode_jpeg  # noqa: F401
        from torchvision.transforms.v2 import functional  # noqa: F401
    except Exception as e:  # not installed, or a build that does not match torch
        raise DjxError(f"{HOW}: torchvision does not import ({type(e).__name__}: "
                       f"{str(e).splitlines()[0][:120] if str(e) else ''})") from None
    import torch
    if not torch.cuda.is_available() or not str(device).startswith("cuda"):
        raise DjxError(f"{HOW}: no CUDA device is usable here (device {device})")


def _version(dist: str) -> str | None:
    import importlib.metadata
    try:
        return importlib.metadata.version(dist).split("+")[0]
    except importlib.metadata.PackageNotFoundError:
        return None


def _torch_wanted() -> str | None:
    """The torch release torchvision's metadata pins (its wheels name one exactly), if any."""
    import importlib.metadata
    try:
        needs = importlib.metadata.requires("torchvision") or []
    except importlib.metadata.PackageNotFoundError:
        return None
    for need in needs:
        name, _, pin = need.partition("==")
        if name.strip() == "torch" and pin and ";" not in pin:
            return pin.strip().split("+")[0]
    return None


def is_jpeg(data: bytes) -> bool:
    """A complete JPEG: its start marker, and its end marker last (a truncated file, or one with
    bytes after its image, is decoded on the host, where the run's load_truncated_images rules)."""
    return data[:3] == b"\xff\xd8\xff" and data.rstrip(b"\x00").endswith(b"\xff\xd9")


def geometry(image_processor) -> dict | None:
    """The processor's resize and crop where the device path can follow it (bicubic; a shortest
    edge or a height and width; an optional centre crop); None otherwise (decode on the host)."""
    if int(getattr(image_processor, "resample", -1)) != 3 or not getattr(image_processor, "do_resize", False):
        return None
    size = _dict(getattr(image_processor, "size", None))
    geo = {"shortest_edge": size.get("shortest_edge"), "height": size.get("height"), "width": size.get("width")}
    if not geo["shortest_edge"] and not (geo["height"] and geo["width"]):
        return None
    if size.get("longest_edge"):
        return None
    crop = _dict(getattr(image_processor, "crop_size", None)) if getattr(image_processor, "do_center_crop", False) else {}
    geo["crop"] = (int(crop["height"]), int(crop["width"])) if crop else None
    return geo


class JpegFile(NamedTuple):
    """A JPEG file's bytes for the device, and the EXIF orientation (1-8) to turn it upright with."""
    data: bytes
    orientation: int


def read_jpeg(images, ref: str) -> JpegFile | None:
    """The file's bytes where it is a complete JPEG the device decodes as the host does (its header
    read and checked as a decode checks it: path, regular file, pixel limit); None for other
    formats and CMYK JPEGs (decoded on the host)."""
    from djx import SampleError
    from djx.core.io.regular_file import open_regular
    images.size(ref)
    try:
        with open_regular(images.path(ref)) as f:
            data = f.read()
    except OSError as e:
        raise SampleError(f"image {ref!r}: cannot read ({e.strerror or e})", "bad_image") from None
    return jpeg_file(data) if is_jpeg(data) else None


def jpeg_file(data: bytes) -> JpegFile | None:
    """`data` with its EXIF orientation where its colour space is one the device decodes as
    Pillow does (YCbCr or greyscale); None otherwise (CMYK or YCCK: Pillow's conversion)."""
    from PIL import Image
    try:
        with Image.open(io.BytesIO(data)) as img:  # the header only
            if img.mode not in ("RGB", "L"):
                return None
            orientation = img.getexif().get(_ORIENTATION, 1)
    except Exception:  # noqa: BLE001  (a header Pillow cannot read: the host's decode says why)
        return None
    return JpegFile(data, orientation if orientation in range(1, 9) else 1)


def upright(image, orientation: int):
    """(..., H, W) turned as Pillow's ImageOps.exif_transpose turns an image with that EXIF
    orientation (2: mirrored, 3: rotated 180, 4: flipped, 5: transposed, 6: rotated 90 clockwise,
    7: transversed, 8: rotated 90 counter-clockwise)."""
    import torch
    if orientation == 2:
        return image.flip(-1)
    if orientation == 3:
        return image.flip(-1, -2)
    if orientation == 4:
        return image.flip(-2)
    if orientation == 5:
        return image.transpose(-1, -2)
    if orientation == 6:
        return torch.rot90(image, -1, dims=(-2, -1))
    if orientation == 7:
        return image.transpose(-1, -2).flip(-1, -2)
    if orientation == 8:
        return torch.rot90(image, 1, dims=(-2, -1))
    return image


_ORIENTATION = 0x0112  # the EXIF tag


def decode(prepared, image_processor, device) -> None:
    """Replace `prepared`'s JPEG bytes by their uint8 pixels on `device` (once; in place)."""
    require(device)
    import torch
    geo = prepared.geometry
    decoded = _decode_all(prepared.jpegs, device)
    decoded = [None if image is None else upright(image, o) for image, o in zip(decoded, prepared.jpeg_orientations)]
    refused = [k for k, image in enumerate(decoded) if image is None]
    for k in refused:  # refused by the device decoder: Pillow, then the processor, as the host does
        decoded[k] = _host_rows(prepared.jpegs[k].numpy().tobytes(), image_processor, geo).to(device)
    rows = resize_all(decoded, geo, done=set(refused))
    n = prepared.n_images
    out = torch.empty((n, *rows.shape[1:]), dtype=torch.uint8, device=device)
    out[prepared.jpeg_rows] = rows
    jpeg_rows = set(prepared.jpeg_rows)
    rest = [i for i in range(n) if i not in jpeg_rows]
    if rest:
        out[rest] = prepared.pixels.to(device)
    prepared.pixels, prepared.jpegs, prepared.jpeg_rows = out, [], []


def settle(device) -> None:
    """Wait for the current CUDA stream's work on `device` (the decode queued there) to finish."""
    import torch
    torch.cuda.current_stream(device).synchronize()


def resize_all(images: list, geo: dict, done: frozenset | set = frozenset(), chunk_pixels: int = 1 << 24):
    """(n, 3, h, w) uint8: each (3, H, W) image flipped, resized and cropped as the processor does,
    the images of one size together (per image, the passes' few kernels cost more in launches than
    in work), in slices of up to `chunk_pixels` input pixels (~400 MB of float64 intermediates by
    default); the indices in `done` are already at the processor's size and are taken as they are."""
    import torch
    out: list = [None] * len(images)
    sizes: dict = {}
    for k, image in enumerate(images):
        if k in done:
            out[k] = image
        else:
            sizes.setdefault(tuple(image.shape), []).append(k)
    for shape, ks in sizes.items():
        step = max(1, chunk_pixels // (shape[-2] * shape[-1]))
        for at in range(0, len(ks), step):
            part = ks[at:at + step]
            resized = _resize(_flip(torch.stack([images[k] for k in part]), geo), geo)
            for k, image in zip(part, resized):
                out[k] = image
    return torch.stack(out)


def _decode_all(jpegs: list, device) -> list:
    from torchvision.io import ImageReadMode, decode_jpeg
    try:
        return list(decode_jpeg(list(jpegs), mode=ImageReadMode.RGB, device=device))
    except RuntimeError:  # one refused: each alone, the refused ones on the host
        out = []
        for data in jpegs:
            try:
                out.append(decode_jpeg(data, mode=ImageReadMode.RGB, device=device))
            except RuntimeError:
                out.append(None)
        return out


def _resize(image, geo: dict):
    """(..., 3, H, W) uint8 resized and cropped as the processor does it (its sizes, its crop offsets):
    Pillow's bicubic, bit for bit (pillow_resize.py), where torchvision's differed by a level here
    and there."""
    from djx.ops.common.pillow_resize import resize_bicubic
    h, w = int(image.shape[-2]), int(image.shape[-1])
    if geo["shortest_edge"]:
        s = int(geo["shortest_edge"])
        short, long = (w, h) if w <= h else (h, w)
        new_long = int(s * long / short)
        size = [new_long, s] if w <= h else [s, new_long]
    else:
        size = [int(geo["height"]), int(geo["width"])]
    image = resize_bicubic(image, size[0], size[1])
    if geo["crop"]:
        ch, cw = geo["crop"]
        top, left = (size[0] - ch) // 2, (size[1] - cw) // 2
        if top >= 0 and left >= 0:
            image = image[..., top:top + ch, left:left + cw]
        else:  # a crop larger than the image: padded, as the processor pads
            from torchvision.transforms.v2 import functional as F
            image = F.center_crop(image, [ch, cw])
    return image


def _flip(image, geo: dict):
    if geo.get("hflip"):
        image = image.flip(-1)
    if geo.get("vflip"):
        image = image.flip(-2)
    return image


def _host_rows(data: bytes, image_processor, geo: dict):
    from PIL import Image, ImageOps

    from djx.ops.common.pixels import processor_pixels
    with Image.open(io.BytesIO(data)) as img:
        image = ImageOps.exif_transpose(img).convert("RGB")
    if geo.get("hflip"):
        image = ImageOps.mirror(image)
    if geo.get("vflip"):
        image = ImageOps.flip(image)
    pixels, table = processor_pixels(image_processor, [image])
    if table is None:
        raise ValueError("image_decode: device needs a processor whose pixels are uint8 before normalisation")
    return pixels[0]


def _dict(size) -> dict:
    if size is None:
        return {}
    if isinstance(size, dict):
        return {k: v for k, v in size.items() if v}
    return {k: getattr(size, k) for k in ("shortest_edge", "longest_edge", "height", "width") if getattr(size, k, None)}
