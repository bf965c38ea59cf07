"""Prepared tensors from a worker to its device's scorer through shared memory (scoring: device).

Each worker connection to a scorer has one shared buffer: an anonymous memory file
(memfd_create) that the worker creates, fills with the tensors of a request, and hands to the
scorer once per connection as a file descriptor over the connection's unix socket (SCM_RIGHTS).
The request itself then carries only where each tensor lies (`SharedTensor`), and the scorer
reads the tensors in place, without a copy through the socket. A field may be a tensor or a list
of them of one dtype (the JPEG files of `image_decode: device`): a list lies back to back in one
region, which the scorer views once and splits (~20 us for 32 files where a view each took ~75).
No name exists in any folder: the memory is freed when both sides let go, a killed worker
included. A larger request grows the buffer (a new one, handed over again). The worker waits for
each answer before it writes the next request, so a buffer is never written while the scorer
reads it.

Where memfd_create is missing (not Linux), requests carry their tensors pickled, as before.
"""
from __future__ import annotations

import dataclasses
import math
import mmap
import os
from dataclasses import dataclass

ALIGN = 64  # each tensor starts on a cache line


@dataclass(frozen=True)
class SharedTensor:
    """Where one tensor of a request lies in its connection's shared buffer."""
    offset: int
    shape: tuple
    dtype: str  # torch's name, e.g. "uint8"


@dataclass(frozen=True)
class SharedTensors:
    """Where a list of tensors of one dtype lies: back to back from `offset`, in order."""
    offset: int
    shapes: tuple  # each tensor's shape
    dtype: str

    def __len__(self) -> int:
        return len(self.shapes)


@dataclass(frozen=True)
class SharedBuffer:
    """Message: the next thing on the connection is the file descriptor of a buffer of `size` bytes."""
    size: int


def _shared_fields(prepared) -> dict:
    """The fields of `prepared` that cross in the buffer: CPU tensors, and non-empty lists of them
    (the JPEG files of `image_decode: device`, one tensor a file: pickled, each cost the scorer
    ~150 us to rebuild through torch's own serialisation, the scorer's largest cost per image)."""
    import torch

    def cpu(t) -> bool:
        return isinstance(t, torch.Tensor) and t.device.type == "cpu"
    if not dataclasses.is_dataclass(prepared) or isinstance(prepared, type):
        return {}
    out = {}
    for f in dataclasses.fields(prepared):
        value = getattr(prepared, f.name)
        if cpu(value) or (isinstance(value, list) and value and all(map(cpu, value))
                          and len({t.dtype for t in value}) == 1):
            out[f.name] = value
    return out


class Outbox:
    """A worker's side: writes a request's tensors into the shared buffer of one connection."""

    def __init__(self):
        self.size, self._fd, self._map = 0, None, None
        self.usable = hasattr(os, "memfd_create")

    def pack(self, prepared, send_buffer) -> object:
        """`prepared` with each CPU tensor field replaced by a SharedTensor (a list of tensors by one
        SharedTensors), its bytes written to the buffer; `send_buffer(SharedBuffer, fd)` is called
        first when the buffer is new."""
        fields = _shared_fields(prepared) if self.usable else {}
        if not fields:
            return prepared
        regions, end = {}, 0  # field -> (offset, its tensors flat, bytes)
        for name, value in fields.items():
            flat = [t.reshape(-1) for t in (value if isinstance(value, list) else [value])]
            nbytes = sum(t.numel() for t in flat) * flat[0].element_size()
            regions[name] = (end, flat, nbytes)
            end += -(-nbytes // ALIGN) * ALIGN
        if end > self.size:
            self._grow(max(end, 2 * self.size))
            send_buffer(SharedBuffer(self.size), self._fd)
        import torch
        refs = {}
        for name, (at, flat, nbytes) in regions.items():
            value, dtype = fields[name], flat[0].dtype
            if nbytes:
                view = torch.frombuffer(self._map, dtype=dtype, count=nbytes // flat[0].element_size(), offset=at)
                if len(flat) > 1:
                    torch.cat(flat, out=view)
                else:
                    view.copy_(flat[0])
            name_of = str(dtype).removeprefix("torch.")
            refs[name] = (SharedTensors(at, tuple(tuple(t.shape) for t in value), name_of) if isinstance(value, list)
                          else SharedTensor(at, tuple(value.shape), name_of))
        return dataclasses.replace(prepared, **refs)

    def _grow(self, size: int) -> None:
        self.close()
        self._fd = os.memfd_create("djx-prepared", os.MFD_CLOEXEC)
        os.ftruncate(self._fd, size)
        self._map, self.size = mmap.mmap(self._fd, size), size

    def close(self) -> None:
        """Let go of the buffer (the scorer's mapping, if any, keeps the memory until it lets go)."""
        if self._fd is not None:
            os.close(self._fd)
        self._fd, self._map, self.size = None, None, 0  # the map closes when no view is left


class Inbox:
    """The scorer's side of one connection: the buffer its worker handed over, read in place."""

    def __init__(self):
        self._map = None

    def attach(self, fd: int, size: int) -> None:
        try:
            self._map = mmap.mmap(fd, size)  # the old map closes when no tensor views it any more
        finally:
            os.close(fd)

    def unpack(self, prepared):
        """`prepared` with each SharedTensor replaced by a tensor viewing the buffer (valid until
        the answer to this request is sent: the worker writes its next request over it)."""
        if not dataclasses.is_dataclass(prepared) or isinstance(prepared, type):
            return prepared
        views = {}
        for f in dataclasses.fields(prepared):
            ref = getattr(prepared, f.name)
            if isinstance(ref, SharedTensor):
                views[f.name] = self._view(ref.offset, ref.shape, ref.dtype)
            elif isinstance(ref, SharedTensors):
                views[f.name] = self._views(ref)
        return dataclasses.replace(prepared, **views) if views else prepared

    def _view(self, offset: int, shape: tuple, dtype: str):
        import torch
        if self._map is None:
            raise RuntimeError("a request named a shared buffer that was never handed over")
        count, dtype = math.prod(shape), getattr(torch, dtype)
        return (torch.frombuffer(self._map, dtype=dtype, count=count, offset=offset).view(shape)
                if count else torch.empty(shape, dtype=dtype))

    def _views(self, ref: SharedTensors) -> list:
        """One view of the region, split: a tensor of each shape."""
        counts = [math.prod(shape) for shape in ref.shapes]
        parts = self._view(ref.offset, (sum(counts),), ref.dtype).split(counts)
        return [p if len(shape) == 1 else p.view(shape) for p, shape in zip(parts, ref.shapes)]
