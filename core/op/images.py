"""Image access for one batch: header-only sizes, decoded RGB on demand, shared by the batch's ops.

Pixels are Data-Juicer's: it decodes through HF `datasets` (open, load the first frame, apply the
EXIF orientation when the file has one, then `convert("RGB")`), and so does `rgb()`. Every failure
(missing file, corrupt or truncated data, decompression bomb) becomes a SampleError whose message
names the file, so the sample is rejected with a reason instead of crashing a worker.
"""
from __future__ import annotations

import os
import struct
import threading
import warnings
from contextlib import contextmanager
from typing import Callable, TypeVar

from PIL import ExifTags, Image, ImageFile, ImageOps, UnidentifiedImageError
from PIL.JpegImagePlugin import JpegImageFile
from PIL.PngImagePlugin import PngImageFile
from PIL.TiffImagePlugin import IMAGELENGTH, IMAGEWIDTH, TiffImageFile

from djx.core.errors import SampleError
from djx.core.io.image_paths import is_remote
from djx.core.io.regular_file import FileRefused, open_regular

BAD_IMAGE = "bad_image"  # rejection code of an image that cannot be read
DECODE_BUDGET = "decode_budget"  # rejection code of an image whose pixels the batch has no room for
_DECODE_BYTES_PER_PIXEL = 7  # the decoded frame (up to 4 bytes a pixel) and its RGB copy (3)

# what Pillow raises on corrupt, truncated or otherwise undecodable data
_DECODE_ERRORS = (OSError, ValueError, SyntaxError, EOFError, struct.error)
_ORIENTATION = ExifTags.Base.Orientation
_SIDEWAYS = (5, 6, 7, 8)  # EXIF orientations whose upright image swaps width and height
_SETTING_LOCK = threading.RLock()  # one read at a time changes a Pillow global
T = TypeVar("T")


class BatchImages:
    """Opens each image at most once per batch; `close()` releases everything.

    `load_truncated_images` is the run's choice (recipe key): False rejects a truncated or
    corrupt file as bad_image; True keeps what decodes, as Data-Juicer does.
    `max_decoded_bytes` bounds the pixels the batch holds decoded: an image whose decode (its
    frame and RGB copy, from the header's size) would take the batch past it is refused with code
    decode_budget instead of the worker running out of memory (a few KB of PNG can decode to
    12000x12000); the chain runs the samples refused again with nothing held (rerun_over_budget).
    """

    def __init__(self, base_dir: str, max_pixels: int, load_truncated_images: bool = False,
                 max_decoded_bytes: int = 4 << 30):
        self.base_dir = base_dir
        self.max_pixels = max_pixels
        self.load_truncated_images = load_truncated_images
        self.max_decoded_bytes = max_decoded_bytes
        self.decoded_bytes = 0  # counted against max_decoded_bytes until close()
        self._sizes: dict[str, tuple[int, int]] = {}
        self._decoded: dict[tuple[str, int], Image.Image] = {}
        self.later_readers = True  # whether an op after the running one reads images (the chain says)

    def path(self, ref: str) -> str:
        return ref if os.path.isabs(ref) else os.path.join(self.base_dir, ref)

    def file_bytes(self, ref: str) -> int:
        """The image file's size in bytes (not decoded), its reference checked as for reading: a
        URL, a folder or a FIFO is a bad image, not a size."""
        with self._open_file(ref) as f:
            return os.fstat(f.fileno()).st_size

    def size(self, ref: str) -> tuple[int, int]:
        """(width, height) of the upright image (what `rgb()` gives), from the file header only."""
        if ref not in self._sizes:
            self._sizes[ref] = self._attempt(ref, "cannot read", lambda: self._header_size(ref))
        return self._sizes[ref]

    def rgb(self, ref: str, target: int = 0) -> Image.Image:
        """Decoded RGB image. With `target`, JPEG draft mode may decode at a reduced scale >= target
        (faster, but no longer Data-Juicer's pixels: the ops' `draft_decode` opt-in)."""
        key = (ref, target)
        if key not in self._decoded:
            if ref in self._sizes:
                self._charge(ref, *self._sizes[ref])
            # else the file is opened once for its header (the size, charged before any pixel is
            # decoded) and its pixels: a hash of many small images paid ~10% for a second open
            self._decoded[key] = self._attempt(ref, "cannot decode", lambda: self._decode(ref, target))
            self.decoded_bytes += self._cost(*self._sizes[ref])
        return self._decoded[key]

    def release(self, ref: str) -> None:
        """The running op is done with `ref`'s decoded pixels: unless a later op of the chain reads
        images, they go now (not when the batch ends), so the next decode reuses their memory (an
        image hash of many small images spent a fifth of its time on fresh pages)."""
        if self.later_readers:
            return
        for key in [k for k in self._decoded if k[0] == ref]:
            self._decoded.pop(key).close()
            self.decoded_bytes -= self._cost(*self._sizes[ref])

    @staticmethod
    def _cost(w: int, h: int) -> int:
        return w * h * _DECODE_BYTES_PER_PIXEL

    def _charge(self, ref: str, w: int, h: int) -> None:
        """Refuse a decode that would take the batch past max_decoded_bytes."""
        cost = self._cost(w, h)
        if self.decoded_bytes + cost > self.max_decoded_bytes:
            held = f", beside the {self.decoded_bytes >> 20} MB of images held with it," if self.decoded_bytes else ""
            raise SampleError(
                f"image {shown(ref)}: {w}x{h} needs ~{cost >> 20} MB decoded{held} past the worker's "
                f"max_decoded_bytes {self.max_decoded_bytes >> 20} MB (raise it where the memory is there)",
                code=DECODE_BUDGET)

    def close(self) -> None:
        for img in self._decoded.values():
            img.close()
        self._decoded.clear()
        self._sizes.clear()
        self.decoded_bytes = 0

    # -- reading one file ---------------------------------------------------------------------
    def _header_size(self, ref: str) -> tuple[int, int]:
        with self._opened(ref) as img:
            return _upright_size(img)

    def _decode(self, ref: str, target: int) -> Image.Image:
        """HF `datasets`' Image.decode_example, then convert("RGB"): Data-Juicer's pixels."""
        with self._opened(ref) as img:
            if ref not in self._sizes:  # its header first: the size, and the batch's budget for it
                self._sizes[ref] = _upright_size(img)
                self._charge(ref, *self._sizes[ref])
            if target and isinstance(img, JpegImageFile):  # JPEG and MPO
                img.draft("RGB", (target, target))
            img.load()  # a multi-frame file (GIF, WebP, TIFF, MPO) gives its first frame
            if isinstance(img, PngImageFile):  # load() read an eXIf chunk after the pixels: the header's
                img._exif = None  # look (_upright_size) cached none, Data-Juicer's decode reads it after load
            upright = img
            if img.getexif().get(_ORIENTATION) is not None:
                upright = ImageOps.exif_transpose(img)  # orientation 1 or unknown: an unchanged copy
            if upright.mode == "RGB":  # convert("RGB") would copy the pixels: keep them, past img's close
                # (Pillow's own helper for a new Image over the same pixels; a copy where it has none)
                keep = getattr(upright, "_new", None)
                rgb = keep(upright.im) if keep is not None else upright.copy()
            else:
                rgb = upright.convert("RGB")  # alpha is dropped, 16-bit values clip at 255, no ICC
            # the alpha is gone: a processor must not find a transparency colour and composite the
            # image onto white (transformers >= 5 does; Data-Juicer's 4.57 did not)
            rgb.info.pop("transparency", None)
            return rgb

    def _attempt(self, ref: str, what: str, read: Callable[[], T]) -> T:
        """`read()` with truncated files refused; on a decode error, again with them allowed
        when the run says so (a complete file decodes the same either way)."""
        try:
            return _read(read, load_truncated=False)
        except _DECODE_ERRORS as e:
            if not self.load_truncated_images or _no_decoder(e):
                hint = "" if isinstance(e, UnidentifiedImageError) or _no_decoder(e) else \
                    "; a truncated or corrupt file (load_truncated_images: true keeps what decodes)"
                raise _unreadable(ref, what, e, hint) from None
            first = e
        try:
            return _read(read, load_truncated=True)
        except _DECODE_ERRORS as e:
            unidentified = isinstance(first, UnidentifiedImageError) and isinstance(e, UnidentifiedImageError)
            raise _unreadable(ref, what, e, "" if unidentified else ", even with load_truncated_images") from None

    @contextmanager
    def _opened(self, ref: str):
        """The image at `ref`, its file opened once (regular file checked on the descriptor), both
        closed on leaving."""
        f = self._open_file(ref)
        try:
            img = self._open(ref, f)
            try:
                yield img
            finally:
                img.close()
        finally:
            f.close()

    def _open_file(self, ref: str):
        if not isinstance(ref, str):
            raise SampleError(f"image reference {shown(ref)} is not a string", code=BAD_IMAGE)
        if not ref.strip():
            raise SampleError("image '': an empty path", code=BAD_IMAGE)
        if "\x00" in ref:
            raise SampleError(f"image {shown(ref)}: a path with a NUL byte names no file", code=BAD_IMAGE)
        if is_remote(ref):
            kind = "a URL" if "://" in ref else "a data: URI"
            raise SampleError(f"image {shown(ref)}: {kind}; djx reads local files (download the images or write "
                              f"them to files, and use their paths)", code=BAD_IMAGE)
        path = self.path(ref)
        try:  # once, by name: a FIFO or device swapped in after a check is refused on the descriptor
            return open_regular(path)
        except FileNotFoundError:
            raise SampleError(f"image {shown(ref)}: file not found ({shown(path)[1:-1]})", code=BAD_IMAGE) from None
        except FileRefused as e:
            raise SampleError(f"image {shown(ref)}: {e}", code=BAD_IMAGE) from None
        except OSError as e:
            raise SampleError(f"image {shown(ref)}: cannot open ({e.strerror or e})", code=BAD_IMAGE) from None

    def _open(self, ref: str, f) -> Image.Image:
        try:
            if os.fstat(f.fileno()).st_size == 0:
                raise SampleError(f"image {shown(ref)}: an empty file (0 bytes)", code=BAD_IMAGE)
            f.seek(0)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", Image.DecompressionBombWarning)
                img = Image.open(f)
        except UnidentifiedImageError:
            raise  # maybe a damaged chunk that load_truncated_images lets through: see _attempt
        except OSError as e:
            raise SampleError(f"image {shown(ref)}: cannot open ({e.strerror or e})", code=BAD_IMAGE) from None
        w, h = img.size
        if w * h > self.max_pixels:
            img.close()
            raise SampleError(f"image {shown(ref)}: {w}x{h} = {w * h} pixels exceeds the limit of "
                              f"{self.max_pixels} (decompression-bomb guard; raise max_image_pixels "
                              f"in the recipe if this image is legitimate)", code=BAD_IMAGE)
        return img


class UndeclaredImages:
    """What `batch.images` is for an op whose class does not set `uses_images = True`: reading
    through it raises, saying so. Undeclared, the op's image paths go unchecked and its stats would
    be reused after its images change (djx stamps the images only of ops that declare them)."""

    def __init__(self, op_name: str):
        self._op_name = op_name

    def __getattr__(self, name: str):
        from djx.core.errors import UsageError
        if name.startswith("__"):  # copy, pickle and friends probing for their hooks
            raise AttributeError(name)
        raise UsageError(f"{self._op_name} reads images (batch.images.{name}) but its class does not set "
                         f"uses_images = True: set it, so djx checks its image paths and computes its stats "
                         f"again when the images change")


def _upright_size(img: Image.Image) -> tuple[int, int]:
    """(width, height) of the upright image, from what its header holds."""
    w, h = img.size
    if isinstance(img, TiffImageFile):  # newer Pillow reports a TIFF's upright size (10.0 did not)
        w, h = img.tag_v2[IMAGEWIDTH], img.tag_v2[IMAGELENGTH]
    # the base reader looks only at what the header holds; PNG's own would decode the pixels to
    # look for an eXIf chunk after the image data
    orientation = Image.Image.getexif(img).get(_ORIENTATION)
    return (h, w) if orientation in _SIDEWAYS else (w, h)


def _read(read: Callable[[], T], load_truncated: bool) -> T:
    """`read()` under the run's Pillow settings rather than whatever the process holds."""
    with _pillow_setting(ImageFile, "LOAD_TRUNCATED_IMAGES", load_truncated):
        try:
            return read()
        except Image.DecompressionBombError:
            # Pillow's own guard (at open, or at load for TIFF and GIF): the run's max_image_pixels,
            # checked in _open, decides instead, so a recipe can allow larger images
            with _pillow_setting(Image, "MAX_IMAGE_PIXELS", None):
                return read()


def shown(ref) -> str:
    """A reference as a reason quotes it: cut when long (a data: URI may be megabytes)."""
    text = repr(ref)
    return text if len(text) <= 200 else f"{text[:160]}... ({len(text):,} characters)"


def _no_decoder(e: Exception) -> bool:
    """A decode error that says a decoder is missing (Ghostscript for EPS, a codec Pillow was built
    without): no setting of the run's would decode the file."""
    text = str(e)
    return "Ghostscript" in text or ("decoder" in text and "not available" in text)


def _unreadable(ref: str, what: str, e: Exception, hint: str) -> SampleError:
    if _no_decoder(e):
        return SampleError(f"image {shown(ref)}: {what} ({e}): a decoder this format needs is not installed",
                           code=BAD_IMAGE)
    if isinstance(e, UnidentifiedImageError):
        return SampleError(f"image {shown(ref)}: not a readable image file{hint}", code=BAD_IMAGE)
    return SampleError(f"image {shown(ref)}: {what} ({e}){hint}", code=BAD_IMAGE)


@contextmanager
def _pillow_setting(module, name: str, value):
    """Pillow reads LOAD_TRUNCATED_IMAGES and MAX_IMAGE_PIXELS as module globals, never per image:
    give one the run's value only around one read, under a lock, and put back what was there."""
    if getattr(module, name) == value:
        yield
        return
    with _SETTING_LOCK:
        saved = getattr(module, name)
        setattr(module, name, value)
        try:
            yield
        finally:
            setattr(module, name, saved)
