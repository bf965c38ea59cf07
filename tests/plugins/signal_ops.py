"""A plug-in op for the signal tests: code of a user's that runs in the driver and catches every
exception, as library code can (`except BaseException`)."""
import os
import time

from djx import Filter, register_op


@register_op("driver_held_filter")
class DriverHeldFilter(Filter):
    """Keeps every sample. Its keep(), when it runs in the process whose pid the file `hold_file`
    holds (the driver checks the outputs with it at the end of a run), writes `held_file` and waits
    while `hold_file` exists, swallowing any exception raised meanwhile."""

    stats_keys = ("held_len",)

    def __init__(self, hold_file: str = "", held_file: str = "", **common):
        super().__init__(**common)
        self.hold_file, self.held_file = hold_file, held_file

    def compute_stats(self, batch):
        for sample in batch.samples:
            batch.stats(sample)["held_len"] = len(sample.get("text", ""))

    def keep(self, stats):
        while self._holds():
            if not os.path.exists(self.held_file):
                with open(self.held_file, "w") as f:
                    f.write(str(os.getpid()))
            try:
                time.sleep(0.01)
            except BaseException:  # noqa: BLE001 - what the test is about
                pass
        return True

    def _holds(self) -> bool:
        try:
            with open(self.hold_file) as f:
                return f.read().strip() == str(os.getpid())
        except (FileNotFoundError, ValueError):
            return False
