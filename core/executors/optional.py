"""Optional dependencies: a run that needs an extra the install lacks says which one to install.

The base install (`pip install djx`) has no Ray; `executor: ray` needs `pip install 'djx[ray]'`.
The check looks for the module without importing it, so it costs nothing on the local engine.
"""
from __future__ import annotations

import importlib.util

from djx.core.errors import DjxError


def require_ray() -> None:
    """Raise DjxError (what to install) unless Ray can be imported."""
    try:
        found = importlib.util.find_spec("ray") is not None
    except (ImportError, ValueError):  # a broken or half-removed install: as good as missing
        found = False
    if not found:
        raise DjxError("executor: ray needs Ray, which is not installed: pip install 'djx[ray]' "
                       "(or use executor: local)")
