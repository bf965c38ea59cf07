"""The rule that fails a finished run which rejected nearly every sample counts the rejections of
every code together: half missing images and half a missing text key is as much a failure as all
of one."""
from __future__ import annotations

import json

from djx.core.run.summary import SYSTEMATIC_SHARE, systematic_rejection


def rejected_file(tmp_path, codes: dict) -> str:
    path = tmp_path / "o.rejected.jsonl"
    path.write_text("".join(json.dumps({"code": code, "reason": f"the first {code}"}) + "\n"
                            for code, n in codes.items() for _ in range(n)))
    return str(path)


def test_two_codes_that_reject_everything_together_fail_the_run_quoting_the_commonest(tmp_path):
    codes = {"bad_input": 50, "bad_image": 50}
    why = systematic_rejection(codes, 100, rejected_file(tmp_path, codes))
    assert why is not None and why.startswith("100 of 100 samples (100.0%) were rejected (bad_input 50, bad_image 50)")
    assert '"the first bad_input"' in why and "the input does not match the recipe" in why
    assert "max_rejected_fraction: 1.0" in why


def test_one_code_keeps_its_message_and_the_share_is_the_same_threshold(tmp_path):
    codes = {"bad_image": 390}
    why = systematic_rejection(codes, 400, rejected_file(tmp_path, codes))
    assert why.startswith('390 of 400 samples (97.5%) were rejected as bad_image (e.g. "the first bad_image")')
    below = {"bad_image": 45, "bad_input": 44}  # 89 of 100: under SYSTEMATIC_SHARE, a run that did its job
    assert SYSTEMATIC_SHARE == 0.9 and systematic_rejection(below, 100, rejected_file(tmp_path, below)) is None
    assert systematic_rejection({"bad_image": 45, "bad_input": 45}, 100, str(tmp_path / "none.jsonl")) \
        .startswith("90 of 100 samples (90.0%) were rejected (bad_image 45, bad_input 45): the input")
    assert systematic_rejection({}, 0, str(tmp_path / "none.jsonl")) is None  # an empty input rejected nothing
