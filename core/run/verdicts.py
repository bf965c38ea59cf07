"""Re-applying the recipe's filters to the stats an export recorded, for the output check.

A kept sample must pass every filter; a dropped sample must fail the filter its `__dj__drop__`
names. keep() reads only the stats, so this needs no model and no image: an export made with other
thresholds, or a stat edited after the run, is caught without recomputing anything."""
from __future__ import annotations

from djx.core.run.chain import _BadVerdict, _verdict
from djx.core.op.base import Filter


class Judge:
    """The recipe's ops, asked for their verdict on recorded stats."""

    def __init__(self, ops: list):
        self.ops = list(ops)

    def kept(self, stats: dict) -> list[str]:
        """Problems of a kept sample: each filter it does not pass."""
        problems = []
        for k, op in enumerate(self.ops):
            if isinstance(op, Filter):
                keep, problem = self._ask(op, k, stats)
                if problem or not keep:
                    problems.append(problem or f"kept sample fails op {k} ({op.name}) on its recorded stats "
                                               f"(exported with other thresholds, or a stat edited since?)")
        return problems

    def dropped(self, stats: dict, op_index: int) -> list[str]:
        """Problems of a dropped sample: the op that dropped it passes it."""
        op = self.ops[op_index]
        if not isinstance(op, Filter):
            return [f"dropped sample names op {op_index} ({op.name}), which is not a filter"]
        keep, problem = self._ask(op, op_index, stats)
        if problem:
            return [problem]
        if keep:
            return [f"dropped sample passes op {op_index} ({op.name}) that its drop names, on its recorded "
                    f"stats (exported with other thresholds, or a stat edited since?)"]
        return []

    @staticmethod
    def _ask(op: Filter, k: int, stats: dict) -> tuple[bool, str | None]:
        try:
            keep, _ = _verdict(op, op.keep(dict(stats)))
            return keep, None
        except KeyboardInterrupt:
            raise
        except _BadVerdict:
            return False, f"op {k} ({op.name}).keep gives no verdict on the recorded stats"
        except Exception as e:  # noqa: BLE001  a plug-in's keep() on stats it did not expect
            return False, f"op {k} ({op.name}).keep raised {type(e).__name__} on the recorded stats"
