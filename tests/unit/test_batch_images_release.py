"""An op done with an image's pixels releases them: the batch keeps them while a later op of the
chain reads images (one decode for all), and frees them at once when none does, so the next
decode reuses that memory instead of touching fresh pages."""
from __future__ import annotations

import numpy as np
from PIL import Image

from djx.core.op.images import BatchImages


def a_jpeg(tmp_path) -> str:
    path = str(tmp_path / "a.jpg")
    Image.fromarray(np.arange(48 * 32 * 3, dtype=np.uint8).reshape(32, 48, 3)).save(path, quality=90)
    return path


def test_an_image_a_later_op_reads_stays_decoded_for_it(tmp_path):
    images = BatchImages(str(tmp_path), 1 << 30)
    path = a_jpeg(tmp_path)
    first = images.rgb(path)
    images.release(path)
    assert images.rgb(path) is first and images.decoded_bytes > 0
    images.close()


def test_without_a_later_reader_a_released_image_is_freed_and_decodes_again_alike(tmp_path):
    images = BatchImages(str(tmp_path), 1 << 30)
    images.later_readers = False
    path = a_jpeg(tmp_path)
    first = np.asarray(images.rgb(path))
    images.release(path)
    assert images.decoded_bytes == 0
    again = images.rgb(path)
    assert again.mode == "RGB" and np.array_equal(np.asarray(again), first)
    assert np.array_equal(first, np.asarray(Image.open(path).convert("RGB")))
    images.close()
