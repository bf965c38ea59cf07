"""OpenCV for the vision ops (faces, subplots): the extra that installs it, and cv2 with its thread
pool sized to the worker's."""
from __future__ import annotations

import os

VISION_EXTRA = "pip install '.[vision]' in djx's checkout"
REQUIRES = {"cv2": VISION_EXTRA}  # an op's `requires`

_pinned = False


def opencv():
    """cv2, its thread pool sized once per process to OMP_NUM_THREADS where that is set (a djx
    worker's thread count): by default OpenCV starts a thread per core in every worker. The
    thread count changes no result."""
    global _pinned
    import cv2
    if not _pinned:
        threads = os.environ.get("OMP_NUM_THREADS", "")
        if threads.isdigit() and int(threads) > 0:
            cv2.setNumThreads(int(threads))
        _pinned = True
    return cv2
