"""Files and inputs that cost: texts built to make a mapper backtrack, YAML aliases that expand to
gigabytes, FIFOs and devices where a resource or image should be, PNGs that decode to gigabytes, a
SIGTERM while the recipe loads, a 'djx' folder in the working directory, a node out of memory.
djx holds when it answers in bounded work with one clear line, never a hang or a traceback."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import yaml

from .common import Case, djx, last_line, one_clear_line, write_jsonl

DJX = [sys.executable, "-m", "djx.cli"]


def _recipe(tmp: Path, process: list, **keys) -> Path:
    path = tmp / "r.yaml"
    path.write_text(yaml.safe_dump({"dataset_path": "d.jsonl", "export_path": "out/o.jsonl", "np": 1,
                                    "process": process, **keys}))
    return path


def _summary(tmp: Path) -> dict:
    return json.loads((tmp / "out" / "o.summary.json").read_text())


def backtracking_mappers(tmp: Path) -> tuple[bool, str]:
    """16 KB of `a.` (clean_links: 87 s), 128 KB around an `@` (clean_email: ~6 min), 1 MB of nested
    <div> (clean_html: 441 s): Data-Juicer's output in linear work or a work_budget rejection."""
    write_jsonl(tmp / "d.jsonl", [{"text": "a." * 8192}, {"text": "a" * 65536 + "@" + "a" * 65536},
                                  {"text": "<div>" * 200_000}])
    process = [{"clean_links_mapper": {}}, {"clean_email_mapper": {}}]
    try:
        import selectolax  # noqa: F401
        process.append({"clean_html_mapper": {}})
    except ImportError:
        pass
    _recipe(tmp, process)
    t0 = time.monotonic()
    try:
        proc = djx("process", "r.yaml", "--quiet", cwd=tmp, timeout=180)
    except subprocess.TimeoutExpired:
        return False, "still running after 180 s"
    codes = _summary(tmp).get("rejected_by_code", {}) if proc.returncode == 0 else {}
    want = {"work_budget": 1} if len(process) == 3 else {}
    return proc.returncode == 0 and codes == want, f"exit {proc.returncode} in {time.monotonic() - t0:.0f} s, rejected {codes}"


def _alias_bomb(depth: int) -> str:
    lines = ['l0: &l0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"l{i}: &l{i} [" + ",".join([f"*l{i - 1}"] * 9) + "]" for i in range(1, depth + 1)]
    return "\n".join(lines + [f"process: *l{depth}"]) + "\n"


def yaml_alias_bomb(tmp: Path) -> tuple[bool, str]:
    """A 461-byte recipe whose aliases nest nine deep (20 GB and 216 s before) is one short error line."""
    (tmp / "bomb.yaml").write_text(_alias_bomb(9))
    try:
        proc = djx("process", "bomb.yaml", cwd=tmp, timeout=60)
    except subprocess.TimeoutExpired:
        return False, "still running after 60 s"
    return one_clear_line(proc) and len(proc.stderr) < 1000, f"{len(proc.stderr)} bytes: {last_line(proc.stderr)}"


def djx_folder_in_cwd(tmp: Path) -> tuple[bool, str]:
    """`djx process` from a folder holding a subfolder named djx: Ray's actors still import djx."""
    (tmp / "djx").mkdir()
    write_jsonl(tmp / "d.jsonl", [{"text": "a text long enough"}])
    _recipe(tmp, [{"text_length_filter": {"min_len": 3}}], executor="ray", export_path="djx/o.jsonl")
    # the installed `djx` command, as a user types it (`python -m` would put the folder first for the driver too)
    proc = subprocess.run([str(Path(sys.executable).parent / "djx"), "process", "r.yaml", "--quiet"], cwd=tmp,
                          capture_output=True, text=True, timeout=300)
    return proc.returncode == 0, f"exit {proc.returncode}: {last_line(proc.stderr) if proc.returncode else 'ran'}"


def _flagged_run(tmp: Path) -> Path:
    words = tmp / "words"
    words.mkdir()
    (words / "flagged_words.json").write_text(json.dumps({"en": ["badword"]}))
    write_jsonl(tmp / "d.jsonl", [{"text": "a clean text"}, {"text": "badword badword"}])
    _recipe(tmp, [{"flagged_words_filter": {"flagged_words_dir": "words", "max_ratio": 0.5}}])
    djx("process", "r.yaml", "--quiet", cwd=tmp)
    return words / "flagged_words.json"


def viewers_fifo_word_list(tmp: Path) -> tuple[bool, str]:
    """check/analyze/explain of a received run whose word list is now a FIFO: they open no resource."""
    word_list = _flagged_run(tmp)
    word_list.unlink()
    os.mkfifo(word_list)
    codes = []
    for args in (("check", "out/o.jsonl"), ("analyze", "out/o.jsonl"), ("explain", "out/o.jsonl", "0")):
        try:
            codes.append(djx(*args, cwd=tmp, timeout=60).returncode)
        except subprocess.TimeoutExpired:
            codes.append("hung")
    return codes == [0, 0, 0], f"check, analyze, explain: {codes}"


def word_list_device(tmp: Path) -> tuple[bool, str]:
    """A run whose word list is /dev/zero is refused in one line naming the device (no memory blow-up)."""
    word_list = _flagged_run(tmp)
    word_list.unlink()
    word_list.symlink_to("/dev/zero")
    proc = djx("process", "r.yaml", "--quiet", cwd=tmp, timeout=60)
    return one_clear_line(proc) and "a device" in proc.stderr, last_line(proc.stderr)


SWAP_AT_OPEN = textwrap.dedent("""
    import os, sys
    from PIL import Image
    from djx.core.op.images import BatchImages
    from djx.core.errors import SampleError
    path = os.path.join(sys.argv[1], "a.png")
    Image.new("RGB", (8, 8)).save(path)
    swapped = []
    def swap(event, args):
        if event == "open" and not swapped and os.fspath(args[0]) == path:
            swapped.append(1); os.rename(path, path + ".was"); os.mkfifo(path)
    sys.addaudithook(swap)
    try:
        BatchImages(sys.argv[1], 10**8).rgb("a.png"); print("decoded")
    except SampleError as e:
        print(e.code, e)
""")


def image_swapped_for_fifo(tmp: Path) -> tuple[bool, str]:
    """The image folder's owner swaps an image for a FIFO as djx opens it: a bad_image, no blocked worker."""
    try:
        proc = subprocess.run([sys.executable, "-c", SWAP_AT_OPEN, str(tmp)], capture_output=True, text=True,
                              timeout=60)
    except subprocess.TimeoutExpired:
        return False, "the worker blocked on the FIFO"
    return proc.stdout.startswith("bad_image"), last_line(proc.stdout or proc.stderr)


DECODING_OP = textwrap.dedent("""
    from djx import Filter, register_op

    @register_op("first_pixel_filter")
    class FirstPixel(Filter):
        uses_images = True
        stats_keys = ("first_pixel",)

        def compute_sample(self, sample, batch):
            batch.stats(sample)["first_pixel"] = [batch.images.rgb(r).getpixel((0, 0))[0] for r in sample["images"]]

        def keep(self, stats):
            return True
""")


def decoded_pixels(tmp: Path) -> tuple[bool, str]:
    """Small PNGs that decode to 5000x5000 each (175 MB counted), three alone and one sample naming
    all three, in one batch, against max_decoded_bytes 400 MB: the batch is done in parts, so each
    photo alone is kept whatever its company; the sample whose own three images pass the budget is
    rejected (decode_budget)."""
    from PIL import Image
    for i in range(3):
        Image.new("RGB", (5000, 5000), (i, i, i)).save(tmp / f"big{i}.png")
    (tmp / "pixel_ops.py").write_text(DECODING_OP)
    write_jsonl(tmp / "d.jsonl", [{"text": "x", "images": [f"big{i}.png"]} for i in range(3)]
                + [{"text": "all", "images": [f"big{i}.png" for i in range(3)]}])
    _recipe(tmp, [{"first_pixel_filter": {}}], custom_ops=["pixel_ops.py"], batch_size=4,
            max_decoded_bytes=400 << 20)
    proc = djx("process", "r.yaml", "--quiet", cwd=tmp, timeout=300)
    summary = _summary(tmp) if proc.returncode == 0 else {}
    codes, kept = summary.get("rejected_by_code"), summary.get("kept")
    return codes == {"decode_budget": 1} and kept == 3, f"exit {proc.returncode}, kept {kept}, rejected {codes}"


BLOCKING_PLUGIN = """
import pathlib
here = pathlib.Path(__file__).parent
(here / "importing").write_text("")
open(here / "fifo", "rb").read()
"""


def sigterm_while_loading(tmp: Path) -> tuple[bool, str]:
    """SIGTERM while a plug-in's import blocks (before the first batch): exit 143 at once, one line."""
    (tmp / "slow_ops.py").write_text(BLOCKING_PLUGIN)
    os.mkfifo(tmp / "fifo")
    write_jsonl(tmp / "d.jsonl", [{"text": "hello"}])
    _recipe(tmp, [{"text_length_filter": {"min_len": 1}}], custom_ops=["slow_ops.py"])
    proc = subprocess.Popen(DJX + ["process", "r.yaml"], cwd=tmp, stderr=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)
    deadline = time.monotonic() + 120
    while not (tmp / "importing").exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    proc.send_signal(signal.SIGTERM)
    try:
        _, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        return False, "SIGTERM absorbed: still running 60 s later"
    return proc.returncode == 143 and "Traceback" not in err, f"exit {proc.returncode}: {last_line(err)}"


def ray_node_memory(tmp: Path) -> tuple[bool, str]:
    """Ray's memory monitor killing a stage actor is said in one line naming memory and what to lower."""
    from ray.exceptions import OutOfMemoryError

    from djx.core.executors.ray.cluster import explain
    said = explain(OutOfMemoryError("Task was killed due to the node running low on memory.\nTraceback (most "
                                    "recent call last):\n  File \"stages.py\", line 97, in __call__\n"))
    return "\n" not in said and "memory" in said and "batch_size" in said, said[:160]


CASES = [
    Case("resources", "res_backtracking_text_mappers", backtracking_mappers),
    Case("resources", "res_yaml_alias_bomb", yaml_alias_bomb),
    Case("resources", "res_djx_folder_in_working_dir", djx_folder_in_cwd, needs_ray=True),
    Case("resources", "res_viewers_fifo_word_list", viewers_fifo_word_list),
    Case("resources", "res_word_list_is_a_device", word_list_device),
    Case("resources", "res_image_swapped_for_fifo", image_swapped_for_fifo),
    Case("resources", "res_decoded_pixels_budget", decoded_pixels),
    Case("resources", "res_sigterm_while_loading", sigterm_while_loading),
    Case("resources", "res_ray_node_memory_one_line", ray_node_memory, needs_ray=True),
]
