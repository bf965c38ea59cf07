"""Image access for one batch: header-only sizes, decoded RGB on demand, shared by the batch's ops.

Every failure (missing file, corrupt or truncated data, decompression bomb) becomes a SampleError
whose message names the file, so the sample is rejected with a reason instead of crashing a worker.
"""
from __future__ import annotations

import os
import warnings

from PIL import Image, UnidentifiedImageError

from .errors import SampleError

BAD_IMAGE = "bad_image"  # rejection code of an image that cannot be read


class BatchImages:
    """Opens each image at most once per batch; `close()` releases everything."""

    def __init__(self, base_dir: str, max_pixels: int):
        self.base_dir = base_dir
        self.max_pixels = max_pixels
        self._sizes: dict[str, tuple[int, int]] = {}
        self._decoded: dict[tuple[str, int], Image.Image] = {}

    def path(self, ref: str) -> str:
        return ref if os.path.isabs(ref) else os.path.join(self.base_dir, ref)

    def file_bytes(self, ref: str) -> int:
        try:
            return os.path.getsize(self.path(ref))
        except OSError as e:
            raise SampleError(f"image {ref!r}: {e.strerror or e}", code=BAD_IMAGE) from None

    def size(self, ref: str) -> tuple[int, int]:
        """(width, height) from the file header, without decoding pixels."""
        if ref not in self._sizes:
            with self._open(ref) as img:
                self._sizes[ref] = img.size
        return self._sizes[ref]

    def rgb(self, ref: str, target: int = 0) -> Image.Image:
        """Decoded RGB image. With `target`, JPEG draft mode may decode at a reduced scale >= target."""
        key = (ref, target)
        if key not in self._decoded:
            img = self._open(ref)
            try:
                if target and img.format == "JPEG":
                    img.draft("RGB", (target, target))
                img.load()
                self._decoded[key] = img.convert("RGB")
            except SampleError:
                raise
            except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as e:
                raise SampleError(f"image {ref!r}: cannot decode ({e})", code=BAD_IMAGE) from None
            finally:
                img.close()
        return self._decoded[key]

    def _open(self, ref: str) -> Image.Image:
        if not isinstance(ref, str):
            raise SampleError(f"image reference {ref!r} is not a string", code=BAD_IMAGE)
        if not ref.strip():
            raise SampleError("image '': an empty path", code=BAD_IMAGE)
        if "://" in ref:
            raise SampleError(f"image {ref!r}: a URL; djx reads local files (download the images and "
                              f"use their paths)", code=BAD_IMAGE)
        path = self.path(ref)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", Image.DecompressionBombWarning)
                img = Image.open(path)
        except FileNotFoundError:
            raise SampleError(f"image {ref!r}: file not found ({path})", code=BAD_IMAGE) from None
        except UnidentifiedImageError:
            raise SampleError(f"image {ref!r}: not a readable image file", code=BAD_IMAGE) from None
        except Image.DecompressionBombError as e:
            raise SampleError(f"image {ref!r}: decompression bomb ({e})", code=BAD_IMAGE) from None
        except OSError as e:
            raise SampleError(f"image {ref!r}: cannot open ({e.strerror or e})", code=BAD_IMAGE) from None
        w, h = img.size
        if w * h > self.max_pixels:
            img.close()
            raise SampleError(f"image {ref!r}: {w}x{h} = {w * h} pixels exceeds the limit of "
                              f"{self.max_pixels} (decompression-bomb guard; raise max_image_pixels "
                              f"in the recipe if this image is legitimate)", code=BAD_IMAGE)
        return img

    def close(self) -> None:
        for img in self._decoded.values():
            img.close()
        self._decoded.clear()
        self._sizes.clear()
