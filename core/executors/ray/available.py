"""Whether Ray can run here, asked before anything starts: installed, importable, and (for
--dry-run) what would stop a Ray run at once. Imports nothing of Ray's until asked."""
from __future__ import annotations

import importlib
import importlib.util

from djx.core.errors import DjxError


def require_ray() -> None:
    """Raise DjxError (what to install) unless Ray imports: the base install has no Ray, and an
    install can be broken (a bad wheel, a missing native library, a version clash). Only a run
    with executor: ray asks, and pays the import its driver needs anyway."""
    try:
        found = importlib.util.find_spec("ray") is not None
    except (ImportError, ValueError):  # a broken or half-removed install: as good as missing
        found = False
    if not found:
        raise DjxError("executor: ray needs Ray, which is not installed: pip install '.[ray]' in djx's checkout "
                       "(or use executor: local)")
    try:
        importlib.import_module("ray")
    except Exception as e:  # noqa: BLE001  (whatever a broken install raises: said in one line)
        raise DjxError(f"executor: ray: Ray is installed but does not import ({type(e).__name__}: {e}); reinstall "
                       f"it with pip install --force-reinstall '.[ray]' in djx's checkout (or use executor: local)") \
            from None


def ray_preflight(recipe, files: list[str]) -> tuple[list[str], list[str]]:
    """What --dry-run says of a Ray run (its lines, its problems): where it would run, and what
    would stop it at once: Ray missing or broken, a cluster address nothing answers at, an input
    the engine cannot read."""
    from djx.core.io.readers import ReadState
    where = f"the Ray cluster at {recipe.ray_address}" if recipe.ray_address else "a local Ray that the run starts"
    lines = [f"executor: ray, on {where}"]
    try:
        require_ray()
        from djx.core.executors.ray.cluster import refuse, refuse_unreachable
        if recipe.ray_address:
            refuse_unreachable(recipe.ray_address)
        note = refuse(files, ReadState())
    except DjxError as e:
        return lines, [str(e)]
    return lines + ([note] if note else []), []
