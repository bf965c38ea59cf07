"""Silencing what a C or C++ library prints straight onto file descriptor 2 (sys.stderr cannot
catch it): held back while it runs, and handed to the caller for an error message."""
from __future__ import annotations

import contextlib
import os
import sys
import tempfile


@contextlib.contextmanager
def quiet_stderr():
    """Within the block, fd 2 writes go to a temporary file; yields `said()`, the text written so
    far (the last 2,000 characters), for an error raised in the block."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as held:
        os.dup2(held.fileno(), 2)

        def said() -> str:
            held.flush()
            held.seek(0)
            return held.read().decode("utf-8", "replace")[-2000:].strip()

        try:
            yield said
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
