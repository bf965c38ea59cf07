"""The table a run prints at its end (core/run/summary.py format_summary), from a summary dict."""
from __future__ import annotations

from djx.core.run.summary import format_summary


def _op(name: str, n: int, kept: int, **extra) -> dict:
    return {"name": name, "in": n, "kept": kept, "dropped": n - kept, "rejected": 0, "seconds": 0.5,
            "reused_stats": 0, "uses_model": False, "phases": {}, **extra}


def _summary(ops: list[dict], image_key: str = "images") -> dict:
    return {"input": 10, "kept": ops[-1]["kept"], "dropped": 10 - ops[-1]["kept"], "rejected": 0, "ops": ops,
            "workers": 1, "seconds": 1.0, "samples_per_second": 10.0, "recipe": {"image_key": image_key},
            "check": {"ok": True}, "outputs": {}}


def test_an_op_named_twice_gets_its_place_in_the_recipe_so_its_rows_differ():
    table = format_summary(_summary([_op("alphanumeric_filter", 10, 8), _op("text_length_filter", 8, 7),
                                     _op("alphanumeric_filter", 7, 5)]))
    rows = [line.split() for line in table.splitlines() if "_filter" in line and "warning" not in line]
    assert [(r[0], r[1], r[-5]) for r in rows] == [("alphanumeric_filter", "#1", "10"), ("text_length_filter", "8", "8"),
                                                  ("alphanumeric_filter", "#2", "7")]


def test_an_op_that_reads_images_and_saw_none_is_warned_about_and_one_that_saw_some_is_not():
    blind = format_summary(_summary([_op("image_shape_filter", 10, 10, with_images=0)], image_key="image"))
    assert ("warning: image_shape_filter saw no sample with images under image_key 'image' (of the 10 that reached "
            "it), so it judged no image") in blind
    seeing = format_summary(_summary([_op("image_shape_filter", 10, 4, with_images=3)]))
    text_only = format_summary(_summary([_op("text_length_filter", 10, 4)]))
    assert "saw no sample with images" not in seeing + text_only
