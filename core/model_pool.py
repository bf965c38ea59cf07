"""Old import path (before core/models/), kept for plug-ins."""
from djx.core.models.pool import *  # noqa: F401,F403
