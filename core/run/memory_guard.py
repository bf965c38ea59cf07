"""The guards of a file run that an in-memory run (Pipeline.results / process) keeps too.

- The systematic-failure stop (run/early_check.py): an op that fails alike for (nearly) every sample
  reaching it raises a DjxError, as a file run stops, instead of quietly rejecting the whole input:
  during the run over windows of 32 samples, and at the input's end over what the op saw, there
  only for an input of at least 32 samples (a probe of a few samples gives each outcome, as it did);
  `stop_on_systematic_failure: false` turns it off.
- `max_rejected_fraction`, when set: once the input is exhausted, a larger share rejected raises a
  DjxError. Unset, a file run's end rule (nearly every sample rejected, for any reasons, fails the
  run) does not apply in memory: there each rejection is an outcome the caller reads with its reason.
- A stat that is not a finite number rejects its sample in the op chain, in memory as in a file run.

Not guarded in memory: `sample_timeout` (the ops run in the caller's process, where a hung op cannot
be stopped: a warning says so when it is set), worker crashes (there are none to restart), and
resume. The caller's records are copied deeply before a chain with a mapper sees them.
"""
from __future__ import annotations

import warnings

from djx.core.errors import DjxError
from djx.core.op.base import Mapper
from djx.core.recipe.recipe import Recipe
from djx.core.run.early_check import WINDOW, EarlyCheck
from djx.core.run.mapped import UNSAVED, frozen, thawed

_FILE_RUN_WORDS = "the run stopped and wrote no export"


class MemoryGuard:
    """One in-memory run's guards: `batch(result)` before a batch's outcomes are yielded, `end(counts)`
    once the input is exhausted; each raises a DjxError that says why the run failed."""

    def __init__(self, chain, recipe, warn_at: int = 2):
        self.recipe = recipe
        self.copies = any(isinstance(op, Mapper) for op in chain.ops)  # a mapper may change nested objects
        self.early = EarlyCheck([op.name for op in chain.ops], recipe.image_special_token,
                                [op.image_key or chain.ctx.image_key for op in chain.ops]) \
            if recipe.stop_on_systematic_failure else None
        if recipe.sample_timeout != Recipe.sample_timeout:  # set, not the default
            warnings.warn(f"sample_timeout {recipe.sample_timeout} is not enforced by results()/process(): they run "
                          f"the ops in this process, where a hung op cannot be stopped; Pipeline.run() (files, "
                          f"worker processes) enforces it", RuntimeWarning, stacklevel=warn_at)

    def record(self, record):
        """The caller's record as the ops get it: a deep copy when a mapper may change it (pickle,
        else deepcopy; as given when neither can copy it)."""
        if not self.copies or not isinstance(record, dict):
            return record
        saved = frozen(record)
        return record if saved is UNSAVED else thawed(saved)

    def batch(self, result) -> None:
        if self.early is not None:
            _stop_if(self.early.add(result))

    def end(self, counts: dict) -> None:
        if self.early is not None and counts["input"] >= WINDOW:  # a probe of a few samples is not judged
            _stop_if(self.early.at_end())
        records, rejected, bound = counts["input"], counts["rejected"], self.recipe.max_rejected_fraction
        if bound is not None and records and rejected / records > bound:
            raise DjxError(f"{rejected} of {records} samples ({rejected / records:.1%}) were rejected, more than "
                           f"max_rejected_fraction {bound}; results() gives each with its reason")


def _stop_if(why: str | None) -> None:
    if why is not None:
        raise DjxError(why.replace(_FILE_RUN_WORDS, "the in-memory run stopped"))
