"""WorkBudget: how many steps one sample's text may cost an op, so a hostile text is rejected with a
reason instead of holding a worker until `sample_timeout`."""
from __future__ import annotations

DEFAULT_STEPS = 50_000_000


class WorkBudgetExceeded(ValueError):
    """A sample's text needs more steps than the op's `work_budget` allows."""


class WorkBudget:
    """Counts the steps (characters looked at, tags walked) spent on one sample's text."""

    def __init__(self, limit: int, what: str):
        self.limit, self.what, self.spent = limit, what, 0

    def spend(self, steps: int) -> None:
        self.spent += steps
        if self.spent > self.limit:
            raise WorkBudgetExceeded(
                f"{self.what} needs more than work_budget={self.limit} steps for this text "
                f"(raise work_budget, or split or shorten the text)")
