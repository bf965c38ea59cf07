"""Image paths in the outputs resolve from the outputs: absolute by default (as Data-Juicer writes
them), or relative to the export's folder so that an export and its images move together."""
from __future__ import annotations

import os

from djx import RunContext
from djx.core.io.image_paths import ImagePathWriter, path_writer
from djx.ops.filter.image_shape_filter import ImageShapeFilter
from djx.ops.filter.text_length_filter import TextLengthFilter


def test_relative_input_paths_are_written_absolute_by_default():
    writer = ImagePathWriter("/data/set", "/exports/run1", "absolute", ("images",))
    assert writer.ref("img/a.png") == "/data/set/img/a.png"
    assert writer.ref("../shared/b.png") == "/data/shared/b.png"
    assert writer.ref("/elsewhere/c.png") == "/elsewhere/c.png"


def test_relative_mode_writes_paths_from_the_exports_folder():
    writer = ImagePathWriter("/data/set", "/data/exports", "relative", ("images",))
    assert writer.ref("img/a.png") == os.path.join("..", "set", "img", "a.png")
    assert os.path.normpath(os.path.join("/data/exports", writer.ref("img/a.png"))) == "/data/set/img/a.png"


def test_what_is_not_a_local_path_is_written_as_it_was():
    """A URL, a blank or a non-string: such samples are rejected with their reason anyway."""
    writer = ImagePathWriter("/data/set", "/exports", "absolute", ("images",))
    for ref in ("https://example.com/a.png", "s3://bucket/a.png", "", "   ", 42, None):
        assert writer.ref(ref) == ref


def test_every_image_key_of_the_run_is_rewritten_and_the_input_record_stays_as_read():
    writer = ImagePathWriter("/data", "/out", "absolute", ("images", "thumb"))
    record = {"text": "t", "images": ["a.png", "b.png"], "thumb": "t.png", "other": "x.png"}
    copy = writer.copy(record)
    assert copy == {"text": "t", "images": ["/data/a.png", "/data/b.png"], "thumb": "/data/t.png", "other": "x.png"}
    assert record["images"] == ["a.png", "b.png"]  # a rejection still shows the record as read
    no_images = {"text": "t"}
    assert writer.copy(no_images) is no_images and writer.copy("not a dict") == "not a dict"


def test_a_run_that_writes_files_rewrites_the_image_keys_of_the_run_and_its_ops():
    ctx = RunContext(dataset_dir="/data", export_dir="/out", image_paths="relative")
    writer = path_writer(ctx, [TextLengthFilter(), ImageShapeFilter(image_key="pictures"), ImageShapeFilter()])
    assert (writer.root, writer.export_dir, writer.mode, writer.keys) == ("/data", "/out", "relative",
                                                                           ("images", "pictures"))
    assert path_writer(RunContext(), [ImageShapeFilter()]) is None  # in memory: paths stay as given
