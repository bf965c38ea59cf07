"""WeightShare: how a worker finds this run's one copy of each model, passed to workers by value."""
from __future__ import annotations

import os
from dataclasses import dataclass, field

from djx.core.models.share.split import spec_key


@dataclass(frozen=True)
class WeightShare:
    """How a worker finds the shared weights of this run: a local run folder, or (Ray) object
    refs of each model's payload. Passed to workers by value."""
    folder: str = ""
    refs: dict = field(default_factory=dict)  # spec_key(spec, device) -> ObjectRef of ray_payload()
    owners: dict = field(default_factory=dict)  # device -> gpu_owner.OwnerAddress (GPUs)
    # signs the skeletons written to `folder`: a worker unpickles only what this run wrote
    secret: bytes = field(default_factory=lambda: os.urandom(32), repr=False)

    def covers(self, device: str) -> bool:
        """Whether a worker on `device` maps its weights from here (GPUs: only through an owner)."""
        return device in self.owners or (not device.startswith("cuda") and bool(self.folder or self.refs))

    def load(self, loader, spec, device: str):
        """`loader(spec, device)`'s model, its weights mapped from the shared copy."""
        return self.load_mapped(loader, spec, device)[0]

    def load_mapped(self, loader, spec, device: str) -> tuple:
        """(the model, whether its weights are mapped from the shared copy rather than loaded here)."""
        if device in self.owners:
            from djx.core.models.share.gpu_owner import load_from_owner
            return load_from_owner(self.owners[device], loader, spec, device), True
        key = spec_key(spec, device)
        if key in self.refs:
            import ray
            from djx.core.models.share.ray_store import from_payload
            try:
                payload = ray.get(self.refs[key])
            except ray.exceptions.RayError:  # its load failed, or its form does not pickle: this process's own
                return loader(spec, device), False  # load, which says the error where there is one
            return from_payload(payload), True
        if self.folder:
            from djx.core.models.share.folder import load_from_folder
            return load_from_folder(self.folder, key, loader, spec, device, self.secret), True
        return loader(spec, device), False
