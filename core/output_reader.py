"""Old import path (before core/io/), kept for readers of outputs."""
from djx.core.io.output_reader import *  # noqa: F401,F403
