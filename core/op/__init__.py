"""The op contract plug-ins write against: Op/Filter/Mapper/Deduplicator/Batch, typed params, the registry, drop reasons, batch images.

`djx.core.op` was a module before the folders; its names stay importable from here."""
from djx.core.op.base import Batch, Filter, Mapper, Op  # noqa: F401  (the old djx.core.op module path)
