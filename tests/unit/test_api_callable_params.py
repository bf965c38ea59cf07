"""An op given a function as a parameter (a lambda, a closure, a def) is fingerprinted by its code,
never by its memory address: the same script resumes its interrupted run and reuses the stats its
last run wrote, while a changed function is still seen, and named as the change."""
from __future__ import annotations

import functools

import pytest

from djx import Filter, ResumeError
from djx.core.recipe.recipe import recipe_from_dict
from djx.core.run.provenance import op_fingerprint
from djx.core.run.resume import fingerprint, resume_point


class _FnFilter(Filter):
    name = "api_test_fn_filter"
    stats_keys = ("fn_value",)

    def __init__(self, fn=None, threshold: int = 3, **common):
        super().__init__(**common)
        self.fn, self.threshold = fn, threshold

    def compute_sample(self, sample, batch):
        batch.stats(sample)["fn_value"] = self.fn(batch.text(sample))

    def keep(self, stats):
        return stats["fn_value"] >= self.threshold


def _made_again(source: str, **closure):
    """The function as a script run again makes it: a new object (a new address), the same code."""
    return eval(source, dict(closure))  # noqa: S307  test input


def _manifest(fp: dict) -> dict:
    """An interrupted run's checkpoint: its fingerprint, nothing read yet."""
    from djx.core.records import OpCounts
    return {"fingerprint": fp, "read": {}, "counts": {"kept": 0, "dropped": 0, "rejected": 0,
                                                      "ops": [OpCounts().to_dict()]}}


def _fingerprint(tmp_path, fn) -> dict:
    data = tmp_path / "in.jsonl"
    data.write_text('{"text": "abc"}\n', encoding="utf-8")
    recipe = recipe_from_dict({"dataset_path": str(data), "export_path": str(tmp_path / "out.jsonl")},
                              base_dir=str(tmp_path))
    return fingerprint(recipe, [_FnFilter(fn=fn)], [str(data)], str(tmp_path))


def test_an_unchanged_lambda_made_again_resumes(tmp_path):
    first, again = _made_again("lambda t: len(t)"), _made_again("lambda t: len(t)")
    assert first is not again and repr(first) != repr(again)  # the addresses differ, as in a new process
    old = _fingerprint(tmp_path, first)
    start = resume_point(_manifest(old),
                         _fingerprint(tmp_path, again), 1, "state")
    assert start.resumed


def _closure(k):
    return lambda t: len(t) * k


@pytest.mark.parametrize("before, after", [
    (lambda: _made_again("lambda t: len(t)"), lambda: _made_again("lambda t: len(t) + 1")),  # its code
    (lambda: _closure(2), lambda: _closure(3)),  # a value its closure holds
    (lambda: _made_again("lambda t, k=2: len(t) * k"), lambda: _made_again("lambda t, k=3: len(t) * k")),  # a default
], ids=["code", "closure", "default"])
def test_a_changed_function_refuses_to_resume_and_says_the_function_changed(tmp_path, before, after):
    old = _fingerprint(tmp_path, before())
    assert _fingerprint(tmp_path, before()) == old
    with pytest.raises(ResumeError) as e:
        resume_point(_manifest(old), _fingerprint(tmp_path, after()), 1, "state")
    assert "the function given as op parameter process[0].api_test_fn_filter.fn changed" in str(e.value)
    assert "the recipe changed" not in str(e.value)


def test_partials_and_functions_in_lists_are_fingerprinted_by_code(tmp_path):
    def scale(t, k):
        return len(t) * k
    assert _fingerprint(tmp_path, functools.partial(scale, k=2)) == _fingerprint(tmp_path, functools.partial(scale, k=2))
    assert _fingerprint(tmp_path, functools.partial(scale, k=2)) != _fingerprint(tmp_path, functools.partial(scale, k=3))


def test_stats_written_with_an_unchanged_lambda_are_vouched_for_and_a_changed_one_are_not():
    same = op_fingerprint(_FnFilter(fn=_made_again("lambda t: len(t)")))
    assert op_fingerprint(_FnFilter(fn=_made_again("lambda t: len(t)"))) == same
    assert op_fingerprint(_FnFilter(fn=_made_again("lambda t: len(t) + 1"))) != same
