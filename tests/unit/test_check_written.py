"""check_outputs fails an export whose dropped or rejected file the run wrote (its summary lists it)
is missing: the summary's dropped count stands in for the dropped file only where none was written
(export_dropped: false)."""
from __future__ import annotations

import json

from djx.core.run.check import check_outputs, written_outputs

POS, DROP = "__dj__pos__", "__dj__drop__"


def outputs(tmp_path) -> tuple[str, str, str]:
    """Two samples kept, one dropped by op 0, none rejected."""
    kept, dropped, rejected = (tmp_path / f"o{kind}.jsonl" for kind in ("", ".dropped", ".rejected"))
    kept.write_text("".join(json.dumps({"text": "x", POS: p}) + "\n" for p in (0, 2)))
    dropped.write_text(json.dumps({"text": "", POS: 1, DROP: {"op": "f", "op_index": 0, "reason": "r"}}) + "\n")
    rejected.write_text("")
    return str(kept), str(dropped), str(rejected)


def test_a_missing_file_the_run_wrote_fails_the_check_and_is_named(tmp_path):
    kept, dropped, rejected = outputs(tmp_path)
    both = ("dropped", "rejected")
    assert check_outputs(kept, dropped, rejected, [("f", ())], input_count=3, dropped_count=1, written=both).ok
    (tmp_path / "o.dropped.jsonl").unlink()
    report = check_outputs(kept, dropped, rejected, [("f", ())], input_count=3, dropped_count=1, written=both)
    assert not report.ok
    assert f"the dropped file {dropped} is missing, although the run wrote it" in report.describe()
    # a run with export_dropped: false wrote none: its summary's count stands in
    assert check_outputs(kept, dropped, rejected, [("f", ())], input_count=3, dropped_count=1,
                         written=("rejected",)).ok
    (tmp_path / "o.rejected.jsonl").unlink()
    report = check_outputs(kept, dropped, rejected, [("f", ())], input_count=3, dropped_count=1, written=both)
    assert f"the rejected file {rejected} is missing" in report.describe()


def test_the_files_a_run_wrote_are_read_from_its_summary():
    assert written_outputs({"outputs": {"dropped": "/o.dropped.jsonl", "rejected": "/o.rejected.jsonl"}}) \
        == ("dropped", "rejected")
    assert written_outputs({"outputs": {"dropped": None, "rejected": "/o.rejected.jsonl"}}) == ("rejected",)
    assert written_outputs({"recipe": {"export_dropped": True}}) == ("dropped",)  # a summary without "outputs"
    assert written_outputs({}) == ()
