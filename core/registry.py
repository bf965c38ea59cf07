"""Old import path (before core/op/), kept for plug-ins."""
from djx.core.op.registry import *  # noqa: F401,F403
