"""The duplicate groups analyze finds in a run's dropped output: counted per kept position (folded
into compact arrays as they come, whatever their order), the largest groups first, and of those only
the kept sample and the first duplicates in input order kept for the page."""
from __future__ import annotations

import random
from collections import Counter

import djx.analyze.duplicates as duplicates
from djx.analyze.duplicates import DuplicateGroups, deduplicator_indexes, format_groups


def dropped(pos: int, kept: int, op_index: int = 0, op: str = "document_deduplicator") -> dict:
    return {"__dj__pos__": pos, "text": f"t{pos}",
            "__dj__drop__": {"op": op, "op_index": op_index, "reason": f"duplicate of {kept}"}}


def item_of(rec: dict, kind: str) -> dict:
    return {"pos": rec.get("__dj__pos__"), "kind": kind}


def second_pass(groups: DuplicateGroups, kept: list[dict], dropped_recs: list[dict], rejected=()) -> None:
    for kind, recs in (("kept", kept), ("dropped", dropped_recs), ("rejected", rejected)):
        for rec in recs:
            groups.add_member(rec, kind, item_of)
    groups.members_done()


def test_counts_sizes_and_the_largest_groups_agree_with_a_plain_count_across_folds(monkeypatch):
    monkeypatch.setattr(duplicates, "_BUFFER", 7)  # fold many times along the way
    rng = random.Random(4)
    kept_of = {pos: rng.choice(range(0, 300, 3)) for pos in range(300, 1500)}
    recs = [dropped(pos, k) for pos, k in kept_of.items()]
    rng.shuffle(recs)
    groups = DuplicateGroups({0: "document_deduplicator"})
    for rec in recs:
        groups.add(rec)
    groups.finish()

    (op,) = groups.ops
    plain = Counter(kept_of.values())
    assert (op.groups, op.removed) == (len(plain), len(kept_of))
    assert op.sizes == sorted(Counter(n + 1 for n in plain.values()).items(), reverse=True)
    want = sorted(plain.items(), key=lambda kv: (-kv[1], kv[0]))[:duplicates.TOP_GROUPS]
    assert [(g.kept_pos, g.size) for g in op.top] == [(k, n + 1) for k, n in want]


def test_a_group_shows_its_kept_sample_and_its_first_duplicates_in_input_order():
    groups = DuplicateGroups({0: "document_deduplicator"})
    recs = [dropped(pos, 2) for pos in (40, 9, 31, 5, 17, 23, 12)]
    for rec in recs:
        groups.add(rec)
    groups.finish()
    second_pass(groups, [{"__dj__pos__": p} for p in (0, 1, 2, 3)], recs)
    (g,) = groups.ops[0].top
    assert g.kept == {"pos": 2, "kind": "kept"} and g.kept_as == "kept"
    assert [d["pos"] for d in g.duplicates] == [5, 9, 12, 17][:duplicates.SHOWN]
    assert g.size == 8 and g.more == 8 - 1 - duplicates.SHOWN


def test_a_kept_sample_a_later_op_rejected_is_found_in_the_rejected_output():
    groups = DuplicateGroups({1: "image_deduplicator"})
    recs = [dropped(4, 1, op_index=1, op="image_deduplicator")]
    groups.add(recs[0])
    groups.finish()
    second_pass(groups, [{"__dj__pos__": 0}], recs,
                [{"__dj__pos__": 1, "code": "bad_image", "record": {"id": "x", "text": "a"}}])
    (g,) = groups.ops[0].top
    assert (g.kept_as, g.kept_id, g.kept) == ("rejected", "x", {"pos": 1, "kind": "rejected"})
    assert "itself rejected by a later op" in format_groups(groups.ops)


def test_only_deduplicators_drops_count_and_one_that_found_none_is_listed():
    groups = DuplicateGroups({0: "document_deduplicator", 2: "image_deduplicator"}, others={1})
    groups.add(dropped(3, 0))
    groups.add(dropped(5, 1, op_index=1, op="a_plugin_filter"))  # its reason reads alike: not a group
    groups.add({"__dj__pos__": 6, "__dj__drop__": {"op": "text_length_filter", "op_index": 1, "reason": "too short"}})
    groups.add(dropped(7, 2, op_index=3, op="my_dedup"))  # a plug-in not loaded: judged by its reason
    groups.finish()
    assert [(o.op_index, o.op, o.groups, o.removed) for o in groups.ops] == \
        [(0, "document_deduplicator", 1, 1), (2, "image_deduplicator", 0, 0), (3, "my_dedup", 1, 1)]
    assert "2. image_deduplicator: no duplicates" in format_groups(groups.ops)


def test_no_deduplicator_no_groups():
    groups = DuplicateGroups(*deduplicator_indexes(None, {"ops": [{"name": "text_length_filter"}]}))
    groups.add({"__dj__pos__": 1, "__dj__drop__": {"op": "text_length_filter", "op_index": 0, "reason": "x"}})
    groups.finish()
    assert not groups and groups.ops == [] and not groups.wanted()


def test_the_deduplicators_are_known_from_the_summarys_op_names():
    summary = {"ops": [{"name": "text_length_filter"}, {"name": "document_minhash_deduplicator"},
                       {"name": "not_an_op_here"}, "not a row"]}
    assert deduplicator_indexes(None, summary) == ({1: "document_minhash_deduplicator"}, {0})


def test_duplicates_the_summary_counts_but_the_outputs_lack_are_said():
    groups = DuplicateGroups({0: "document_deduplicator"})
    groups.add(dropped(3, 0))
    groups.finish({"ops": [{"name": "document_deduplicator", "in": 9, "kept": 4, "dropped": 5, "rejected": 0}]})
    (op,) = groups.ops
    assert (op.groups, op.removed, op.unwritten) == (1, 1, 4)
    assert "4 duplicates removed are not in the dropped output" in format_groups(groups.ops)


def test_two_deduplicators_groups_kept_for_the_same_sample_each_show_it():
    groups = DuplicateGroups({0: "image_deduplicator", 1: "document_deduplicator"})
    recs = [dropped(2, 0, op_index=0, op="image_deduplicator"), dropped(5, 0, op_index=1),
            dropped(6, 0, op_index=1)]
    for rec in recs:
        groups.add(rec)
    groups.finish()
    second_pass(groups, [{"__dj__pos__": 0, "id": "a"}, {"__dj__pos__": 1}], recs)
    image, text = groups.ops
    assert [(g.kept_pos, g.size, g.kept_id, [d["pos"] for d in g.duplicates]) for g in image.top + text.top] == \
        [(0, 2, "a", [2]), (0, 3, "a", [5, 6])]
    assert not groups.kept_missing()


def test_a_position_no_int64_holds_is_no_duplicate():
    groups = DuplicateGroups({0: "document_deduplicator"})
    groups.add(dropped(3, 10 ** 30))
    groups.finish()
    assert groups.ops[0].groups == 0
