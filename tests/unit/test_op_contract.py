"""The op contract a plug-in is written against, used directly: a Batch, compute_stats, keep and
the drop reason, in this process, with no run around it."""
from __future__ import annotations

import sys

import pytest

from djx import (Batch, Filter, Mapper, Op, OpChain, RunContext, SampleError, UsageError, range_reason,
                 register_op)
from djx.core.op.images import BatchImages
from djx.core.op.reasons import default_reason
from djx.core.records import Item
from djx.ops.filter.image_text_similarity_filter import ImageTextSimilarityFilter


@register_op("contract_word_count_filter")
class WordCountFilter(Filter):
    """Keep samples with at least `min_words` words: a whole Data-Juicer-style filter."""

    stats_keys = ("num_words",)

    def __init__(self, min_words: int = 3, **common):
        super().__init__(**common)
        self.min_words = min_words

    def compute_sample(self, sample: dict, batch: Batch) -> None:
        text = batch.text(sample)
        if "\x00" in text:
            raise SampleError("text contains a NUL byte", "bad_text")
        batch.stats(sample)["num_words"] = len(text.split())

    def keep(self, stats: dict) -> bool:
        return stats["num_words"] >= self.min_words

    def drop_reason(self, stats: dict) -> str:
        return range_reason("num_words", stats["num_words"], self.min_words, sys.maxsize, "min_words", "max_words")


class UnexplainedFilter(Filter):
    """Drops everything and says nothing of why: its reason is the default one."""

    stats_keys = ("limit", "ratio", "flag")

    def compute_sample(self, sample: dict, batch: Batch) -> None:
        batch.stats(sample).update(limit=sys.maxsize, ratio=0.123456, flag=True)

    def keep(self, stats: dict) -> bool:
        return False


def batch_of(*texts: str) -> Batch:
    ctx = RunContext()
    return Batch([{"text": t} for t in texts], ctx, BatchImages(".", ctx.max_image_pixels), None,
                 ctx.text_key, ctx.image_key)


def test_a_per_sample_filter_computes_keeps_and_explains_its_drops():
    op = WordCountFilter(min_words=3)
    batch = batch_of("one two three four", "too short")
    op.compute_stats(batch)
    stats = [batch.stats(s) for s in batch.samples]
    assert stats == [{"num_words": 4}, {"num_words": 2}]
    assert [op.keep(s) for s in stats] == [True, False]
    assert default_reason(op, stats[1]) == "num_words=2 below min_words 3"


def test_a_sample_error_in_compute_sample_rejects_that_sample_alone_with_its_reason_and_code():
    batch = batch_of("a b c", "nul \x00 here", "d e f g")
    WordCountFilter().compute_stats(batch)
    assert batch.rejected == {1: "text contains a NUL byte"}
    assert batch.codes == {1: "bad_text"}
    assert [s.get("__dj__stats__") for s in batch.samples] == [{"num_words": 3}, None, {"num_words": 4}]


def test_the_chain_writes_a_sample_errors_reason_and_code_and_keeps_the_others():
    chain = OpChain([WordCountFilter()], RunContext())
    result = chain.run([Item(i, {"text": t}) for i, t in enumerate(["a b c", "nul \x00 here", "two words"])])
    assert [s["text"] for s in result.kept] == ["a b c"]
    assert [s["__dj__drop__"]["reason"] for s in result.dropped] == ["num_words=2 below min_words 3"]
    [rej] = result.rejected
    assert (rej.pos, rej.op, rej.reason, rej.code, rej.error) == (
        1, "contract_word_count_filter", "text contains a NUL byte", "bad_text", None)


def test_any_other_error_in_compute_sample_reaches_the_chain_which_rejects_only_that_sample():
    class FussyFilter(WordCountFilter):
        def compute_sample(self, sample: dict, batch: Batch) -> None:
            if sample["text"] == "bad":
                raise ValueError("cannot count this")
            super().compute_sample(sample, batch)

    with pytest.raises(ValueError, match="cannot count this"):
        FussyFilter().compute_stats(batch_of("a b c", "bad"))
    result = OpChain([FussyFilter(min_words=1)], RunContext()).run(
        [Item(i, {"text": t}) for i, t in enumerate(["a b c", "bad", "d e"])])
    assert [s["text"] for s in result.kept] == ["a b c", "d e"]
    [rej] = result.rejected
    assert (rej.pos, rej.code, rej.error) == (1, "op_error", "ValueError")
    assert "ValueError: cannot count this" in rej.reason


def test_a_batched_filter_overrides_compute_stats_alone():
    class RankFilter(Filter):
        """Each sample's rank by text length within its batch: needs the whole batch at once."""

        stats_keys = ("rank",)

        def compute_stats(self, batch: Batch) -> None:
            order = sorted(batch.samples, key=lambda s: len(batch.text(s)))
            for rank, sample in enumerate(order):
                batch.stats(sample)["rank"] = rank

        def keep(self, stats: dict) -> bool:
            return stats["rank"] > 0

    batch = batch_of("longest text", "a", "mid")
    RankFilter().compute_stats(batch)
    assert [batch.stats(s)["rank"] for s in batch.samples] == [2, 0, 1]


def test_a_filter_that_computes_nothing_is_refused_when_made_with_what_to_write():
    class KeepOnlyFilter(Filter):
        def keep(self, stats: dict) -> bool:
            return True

    with pytest.raises(UsageError, match=r"KeepOnlyFilter computes no stats: .*compute_sample\(sample, batch\)"
                                         r".*compute_stats\(batch\)"):
        KeepOnlyFilter()


def test_the_default_drop_reason_formats_values_as_range_reason_does():
    """One formatting for every reason: an unbounded integer reads `none`, floats 4 digits."""
    op = UnexplainedFilter()
    batch = batch_of("x")
    op.compute_stats(batch)
    assert op.drop_reason(batch.stats(batch.samples[0])) is None
    assert default_reason(op, batch.stats(batch.samples[0])) == "limit=none, ratio=0.1235, flag=True outside the kept range"
    assert range_reason("limit", sys.maxsize, 0, 10, "min_limit", "max_limit") == "limit=none above max_limit 10"
    assert range_reason("ratio", 0.123456, 0.5, 1.0, "min_ratio", "max_ratio") == "ratio=0.1235 below min_ratio 0.5"


def test_a_drop_reason_that_fails_falls_back_to_the_stats_values():
    class BrokenReasonFilter(WordCountFilter):
        def drop_reason(self, stats: dict) -> str:
            raise KeyError("num_words_typo")

    assert default_reason(BrokenReasonFilter(), {"num_words": 1}) == "num_words=1 outside the kept range"


def test_every_hook_has_its_default_on_the_base():
    for cls in (Op, Filter, Mapper, WordCountFilter):
        assert cls.path_params == ()
    assert Filter.stat_shapes == {} and WordCountFilter().stat_shapes == {}
    assert Filter.drop_reason(WordCountFilter(), {"num_words": 0}) is None
    # a subclass may declare stat_shapes as a property of its parameters
    assert ImageTextSimilarityFilter().stat_shapes == {"image_text_similarity": "per_chunk"}
    assert ImageTextSimilarityFilter.path_params == ("hf_clip",)


class NeedsAbsentPackageFilter(Filter):
    """An op whose optional package is not installed here."""

    name = "needs_absent_package_filter"
    stats_keys = ("x",)
    requires = {"djx_no_such_package_xyz": "pip install '.[nothing]' in djx's checkout", "json": "(always there)"}

    def compute_sample(self, sample, batch):
        batch.stats(sample)["x"] = 1

    def keep(self, stats):
        return True


def test_an_op_whose_package_is_missing_fails_when_made_naming_what_to_install():
    from djx.core.errors import RecipeError
    with pytest.raises(RecipeError) as e:
        NeedsAbsentPackageFilter()
    assert str(e.value) == ("needs_absent_package_filter: needs the Python package 'djx_no_such_package_xyz', "
                            "which is not installed: pip install '.[nothing]' in djx's checkout")


def test_a_present_requirement_lets_the_op_be_made():
    class NeedsJson(NeedsAbsentPackageFilter):
        requires = {"json": "(always there)", "os.path": "(always there)"}
    assert NeedsJson().params() == {}


def test_a_batchs_dropped_and_rejected_samples_come_out_in_input_order_whichever_op_or_check_took_them():
    """The dropped and rejected files list a batch's samples as they were read, as the Ray engine
    writes them: not grouped by the op that dropped them, nor bad input before op rejections."""
    class CharFilter(Filter):
        stats_keys = ("chars",)

        def compute_sample(self, sample: dict, batch: Batch) -> None:
            batch.stats(sample)["chars"] = len(batch.text(sample))

        def keep(self, stats: dict) -> bool:
            return stats["chars"] < 12

    texts = ["a b c", "one", "a very long text of words", "nul \x00 here", "x y z w", 5, "two words"]
    items = [Item(i, {"text": t}) for i, t in enumerate(texts)]
    result = OpChain([CharFilter(), WordCountFilter()], RunContext()).run(items)
    assert [s["__dj__pos__"] for s in result.dropped] == [1, 2, 6]  # op 1, op 0, op 1
    assert [s["__dj__drop__"]["op_index"] for s in result.dropped] == [1, 0, 1]
    assert [(rej.pos, rej.code) for rej in result.rejected] == [(3, "bad_text"), (5, "bad_input")]
