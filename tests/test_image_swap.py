"""An image folder's owner can swap a file for a FIFO at the worst moment: after djx looked at the
name, before it opened it. An image is opened once by name, non-blocking, and checked on the open
descriptor, so the swap is refused as a bad image instead of blocking the worker until
sample_timeout. The swap is made by an audit hook at the exact moment the image is opened, in a
child process whose cap is only a hang guard."""
from __future__ import annotations

import subprocess
import sys
import textwrap

SWAP_AT_OPEN = textwrap.dedent("""
    import os, sys
    from PIL import Image
    from djx.core.op.images import BatchImages
    from djx.core.errors import SampleError
    folder = sys.argv[1]
    path = os.path.join(folder, "a.png")
    Image.new("RGB", (8, 8), "red").save(path)
    swapped = []

    def swap_when_opened(event, args):
        if event == "open" and not swapped and os.fspath(args[0]) == path:
            swapped.append(True)
            os.rename(path, path + ".was")
            os.mkfifo(path)

    sys.addaudithook(swap_when_opened)
    try:
        BatchImages(folder, 10**8).rgb("a.png")
        print("decoded")
    except SampleError as e:
        print("rejected:", e.code, e)
""")


def test_an_image_swapped_for_a_fifo_when_opened_is_rejected(tmp_path):
    done = subprocess.run([sys.executable, "-c", SWAP_AT_OPEN, str(tmp_path)], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("rejected: bad_image") and "a FIFO" in done.stdout
