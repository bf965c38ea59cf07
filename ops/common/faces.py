"""OpenCV Haar-cascade face detection for the face filters, as Data-Juicer runs it.

Data-Juicer's `detect_faces`: the decoded RGB image in greyscale (OpenCV's BGR2GRAY of the
channel-reversed array, which is its RGB2GRAY), `CascadeClassifier.detectMultiScale` with
scaleFactor 1.1, minNeighbors 3 unless the op says otherwise, and each box clipped to the image.

The cascade is a file: `cv_classifier`, or haarcascade_frontalface_alt.xml from the OpenCV 4.x
wheels (`cv2.data.haarcascades`; the 5.0 wheels ship none). A missing or unloadable cascade fails
the recipe at load, naming the file and what to install; it never reaches a sample. Loaded
cascades are kept per process, by path (ops hold only the path, so they pickle to workers).
"""
from __future__ import annotations

import os
import threading

from djx import Batch, RangeFilter, RecipeError, SampleError
from djx.ops.common.vision import REQUIRES, VISION_EXTRA, opencv

DEFAULT_CASCADE = "haarcascade_frontalface_alt.xml"  # Data-Juicer's default

_cascades: dict[str, object] = {}
_lock = threading.Lock()


def default_cascade_path() -> str:
    """haarcascade_frontalface_alt.xml where the installed OpenCV keeps its cascades."""
    import cv2
    folder = getattr(getattr(cv2, "data", None), "haarcascades", None)
    if not folder:
        raise RecipeError(f"cv_classifier: OpenCV {cv2.__version__} ships no Haar cascades (cv2.data."
                          f"haarcascades is missing; the OpenCV 5 wheels have none): give cv_classifier "
                          f"the path of {DEFAULT_CASCADE}, or install OpenCV 4: {VISION_EXTRA}")
    return os.path.join(folder, DEFAULT_CASCADE)


def cascade(path: str):
    """The loaded cascade classifier at `path` (once per process); RecipeError when the file is
    missing or is not a cascade OpenCV can load."""
    with _lock:
        found = _cascades.get(path)
        if found is None:
            found = _cascades[path] = _load(path)
        return found


def _load(path: str):
    import cv2
    if not os.path.isfile(path):
        raise RecipeError(missing_cascade(path, given=True))
    try:
        classifier = cv2.CascadeClassifier(path)
        empty = classifier.empty()
    except (cv2.error, SystemError) as e:  # a malformed XML: cv2.error, or SystemError wrapping it
        cause = e.__cause__ or e.__context__ or e
        raise RecipeError(f"cv_classifier: OpenCV cannot load {path} as a cascade classifier: "
                          f"{str(cause).strip().splitlines()[-1]}") from None
    if empty:
        raise RecipeError(f"cv_classifier: OpenCV cannot load {path} as a cascade classifier "
                          f"(not a Haar or LBP cascade XML)")
    return classifier


def missing_cascade(path: str, given: bool) -> str:
    """Why the cascade at `path` cannot be used: the file is not there."""
    if given:
        return (f"cv_classifier: no cascade file at {path} (a relative path is taken from the recipe's "
                f"folder when the file is there, else from the working directory)")
    return (f"cv_classifier: OpenCV's {DEFAULT_CASCADE} is not at {path}; install OpenCV 4, whose wheels "
            f"ship it ({VISION_EXTRA}), or give cv_classifier the path of a Haar cascade XML")


def check_detector_params(scale_factor: float, min_neighbors: int, min_size, max_size) -> None:
    """What detectMultiScale would assert on mid-run, said at load."""
    if not scale_factor > 1:
        raise RecipeError(f"scaleFactor: must be above 1 (each scale is this much larger than the "
                          f"last), got {scale_factor}")
    if min_neighbors < 0:
        raise RecipeError(f"minNeighbors: must be >= 0, got {min_neighbors}")
    for name, size in (("minSize", min_size), ("maxSize", max_size)):
        if size is not None and (len(size) != 2 or any(v < 0 for v in size)):
            raise RecipeError(f"{name}: expected [width, height] in pixels (>= 0), got {size}")


def detect_faces(image, classifier, scale_factor: float, min_neighbors: int,
                 min_size=None, max_size=None) -> list[tuple[int, int, int, int]]:
    """[(x, y, w, h)] of the faces in a PIL RGB image, each box clipped to the image."""
    import numpy as np
    cv2 = opencv()
    grey = cv2.cvtColor(np.asarray(image), cv2.COLOR_RGB2GRAY)
    kw = {"scaleFactor": scale_factor, "minNeighbors": min_neighbors}
    if min_size is not None:
        kw["minSize"] = tuple(min_size)
    if max_size is not None:
        kw["maxSize"] = tuple(max_size)
    boxes = []
    for x, y, w, h in classifier.detectMultiScale(grey, **kw):
        x, y = max(int(x), 0), max(int(y), 0)
        boxes.append((x, y, min(int(w), image.width - x), min(int(h), image.height - y)))
    return boxes


class HaarFaceFilter(RangeFilter):
    """Base of the face filters: per image, the faces a Haar cascade finds in the decoded image.

    The detector parameters are Data-Juicer's extra keyword arguments, under its names."""

    uses_text = False
    uses_images = True
    requires = REQUIRES
    path_params = ("cv_classifier",)

    def _init_detector(self, cv_classifier: str, scale_factor: float, min_neighbors: int,
                       min_size, max_size) -> None:
        check_detector_params(scale_factor, min_neighbors, min_size, max_size)
        self.cv_classifier = cv_classifier
        self.cascade_path = cv_classifier or default_cascade_path()
        if not os.path.isfile(self.cascade_path):
            raise RecipeError(missing_cascade(self.cascade_path, given=bool(cv_classifier)))
        cascade(self.cascade_path)  # a broken cascade fails here, at load, too
        self.detector_kwargs = {"scale_factor": scale_factor, "min_neighbors": min_neighbors,
                                "min_size": min_size, "max_size": max_size}

    def faces_per_image(self, sample: dict, batch: Batch) -> list[tuple[object, list]]:
        """[(decoded image, face boxes)] for each of the sample's images, in order; an image that
        does not decode raises SampleError (its sample is rejected, naming the file)."""
        import cv2
        classifier = cascade(self.cascade_path)
        found: dict[str, list] = {}
        out = []
        for ref in batch.image_refs(sample):
            image = batch.images.rgb(ref)
            if ref not in found:
                try:
                    found[ref] = detect_faces(image, classifier, **self.detector_kwargs)
                except cv2.error as e:
                    raise SampleError(f"image {ref!r}: face detection failed: "
                                      f"{str(e).strip().splitlines()[-1]}") from None
            out.append((image, found[ref]))
        return out
