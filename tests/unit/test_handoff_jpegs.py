"""The JPEG files of `image_decode: device` (one tensor a file) reach the scorer as the pixels do:
in the connection's shared buffer, the request itself carrying only where each lies; pickled
(Ray's object store, no shared buffer) they travel as plain bytes."""
from __future__ import annotations

import os
import pickle
from dataclasses import dataclass

import torch

from djx.core.models.share.handoff import Inbox, Outbox, SharedTensors
from djx.ops.common.prepared import PreparedPairs, join


@dataclass
class Parts:
    tensors: list
    mixed: list  # two dtypes: no one region holds them, so they stay in the request


TABLE = torch.rand(3, 256, generator=torch.Generator().manual_seed(0))  # one normalisation


def jpeg_batch(seed: int, n: int = 5) -> PreparedPairs:
    g = torch.Generator().manual_seed(seed)
    files = [torch.randint(0, 256, (1000 + 37 * k,), dtype=torch.uint8, generator=g) for k in range(n)]
    pixels = torch.randint(0, 256, (2, 3, 8, 8), dtype=torch.uint8, generator=g)  # rows the host decoded
    return PreparedPairs(pixels, [[1, 2, 3]] * n, [(k, k) for k in range(n + 2)], TABLE,
                         jpegs=files, jpeg_rows=[2 + k for k in range(n)], jpeg_orientations=[1] * n)


def test_jpeg_files_cross_in_the_shared_buffer_not_the_request():
    if not hasattr(os, "memfd_create"):
        return  # no shared buffer on this system: requests are pickled (the test below)
    prepared = jpeg_batch(1)
    handed = []
    outbox, inbox = Outbox(), Inbox()
    shared = outbox.pack(prepared, lambda message, fd: handed.append((message.size, os.dup(fd))))
    assert len(handed) == 1 and handed[0][0] >= sum(t.numel() for t in prepared.jpegs)
    assert isinstance(shared.jpegs, SharedTensors) and len(shared.jpegs.shapes) == 5  # one region, in order
    request = pickle.dumps(shared, protocol=pickle.HIGHEST_PROTOCOL)
    assert len(request) < 2000  # where each file lies, not the files' 5.4 KB
    inbox.attach(handed[0][1], handed[0][0])
    got = inbox.unpack(pickle.loads(request))
    assert [t.tolist() for t in got.jpegs] == [t.tolist() for t in prepared.jpegs]
    assert torch.equal(got.pixels, prepared.pixels)
    assert got.jpeg_rows == prepared.jpeg_rows and got.pairs == prepared.pairs
    # the scorer joins requests of several workers; their files stay in order with their rows
    joined = join([got, jpeg_batch(2, n=3)])
    assert joined.n_images == 2 + 5 + 2 + 3
    assert [t.numel() for t in joined.jpegs] == [t.numel() for t in prepared.jpegs] + [1000, 1037, 1074]
    outbox.close()


def test_pickled_jpeg_files_travel_as_bytes_and_come_back_as_tensors():
    prepared = jpeg_batch(3)
    assert all(type(b) is bytes for b in prepared.__getstate__()["jpegs"])  # not torch's storage, file by file
    data = pickle.dumps(prepared, protocol=pickle.HIGHEST_PROTOCOL)
    back = pickle.loads(data)
    assert [t.dtype for t in back.jpegs] == [torch.uint8] * 5
    assert [t.tolist() for t in back.jpegs] == [t.tolist() for t in prepared.jpegs]
    back.jpegs[0][0] = 7  # writable, as a decoder's input may need
    assert torch.equal(back.pixels, prepared.pixels) and back.jpeg_rows == prepared.jpeg_rows


def test_a_list_of_tensors_keeps_each_shape_and_empty_members_through_one_region():
    if not hasattr(os, "memfd_create"):
        return
    g = torch.Generator().manual_seed(5)
    tensors = [torch.rand(2, 3, generator=g), torch.empty(0), torch.rand(4, generator=g), torch.rand(1, 2, 2, generator=g)]
    mixed = [torch.ones(2, dtype=torch.int64), torch.ones(3)]
    handed = []
    outbox, inbox = Outbox(), Inbox()
    shared = outbox.pack(Parts(tensors, mixed), lambda message, fd: handed.append((message.size, os.dup(fd))))
    assert isinstance(shared.tensors, SharedTensors) and shared.mixed is mixed
    inbox.attach(*handed[0][::-1])
    got = inbox.unpack(pickle.loads(pickle.dumps(shared)))
    assert [t.shape for t in got.tensors] == [t.shape for t in tensors]
    assert all(torch.equal(a, b) for a, b in zip(got.tensors, tensors))
    outbox.close()
