"""A trial run (`--limit N`): the first N samples, whose summary estimates the whole dataset."""
from __future__ import annotations

import json

from djx.core.errors import DjxError
from djx.core.io.outputs import OutputPaths


def check_limit(limit) -> None:
    """A trial run's limit: a positive number of samples."""
    if limit is None:
        return
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise DjxError(f"limit: expected a positive number of samples, got {limit!r}")


def refuse_trial_over_full_run(paths: OutputPaths, limit: int) -> None:
    """A trial (--limit) would replace the outputs of a finished full run with a sample of them."""
    try:
        with open(paths.summary, encoding="utf-8") as f:
            earlier = json.load(f)
    except (OSError, ValueError):
        return  # no finished run there (or not one djx can read): nothing a trial could lose
    if isinstance(earlier, dict) and earlier.get("partial") is False:
        raise DjxError(f"{paths.export} holds the outputs of a finished full run ({earlier.get('kept', '?')} kept of "
                       f"{earlier.get('input', '?')}); a --limit {limit} trial would replace them with a sample: "
                       f"give the trial another export path (--export-path), or --restart to replace them")
