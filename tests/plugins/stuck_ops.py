"""A plug-in op that never returns on samples marked `stuck`, for the watchdog and kill tests.
It writes its pid to `marker` when it starts hanging, so a test can wait for that state."""
import os
import time

from djx import Filter, register_op


@register_op("stuck_filter")
class StuckFilter(Filter):
    """Never returns on a sample whose `stuck` field is set (writes its pid to `marker` first)."""

    stats_keys = ("seen",)

    def __init__(self, marker: str = "", **common):
        super().__init__(**common)
        self.marker = marker

    def compute_stats(self, batch):
        for sample in batch.samples:
            if sample.get("stuck"):
                if self.marker:
                    with open(self.marker + ".tmp", "w") as f:
                        f.write(str(os.getpid()))
                    os.replace(self.marker + ".tmp", self.marker)
                while True:
                    time.sleep(1)
            batch.stats(sample)["seen"] = 1

    def keep(self, stats):
        return True
