"""Shared fixtures: tiny datasets built in tmp_path (PIL images, JSON Lines), recipes, the CLI, one
Ray cluster for the session; and the markers' rules (a Ray test skips where Ray is not installed).

Runs use the fork start method unless spawn is the point of a test (spawn workers take seconds to
start); every path a test writes is under tmp_path. Plain functions live in helpers.py (the names
imported from it below stay importable from here).
"""
from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml
from PIL import Image

from helpers import (LONG, PLUGIN_SITE, PLUGINS_DIR, REPO_DIR, TESTS_DIR,  # noqa: F401  (re-exported)
                     read_jsonl_file, write_jsonl_file)

RAY_MISSING = "Ray is not installed, or does not import (pip install -e '.[test,ray]' runs the Ray tests)"


def pytest_configure(config):
    """The tests that press Ctrl-C act as a person at a terminal, where SIGINT and SIGQUIT reach the
    process. A test run started in the background by a non-interactive shell (`cmd &`, a job
    runner) inherits both ignored, and every process it starts would too: give them back their
    terminal meaning here (Python's KeyboardInterrupt for SIGINT), which the runs it starts get."""
    import signal
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if signal.getsignal(signal.SIGQUIT) == signal.SIG_IGN:
        signal.signal(signal.SIGQUIT, signal.SIG_DFL)


@pytest.hookimpl(tryfirst=True)  # before -m selects: `-m "not ray"` sees the markers added here
def pytest_collection_modifyitems(config, items):
    """A test that joins the session's Ray cluster is a `ray` test, and every `ray` test is `slow`
    (a Ray Data run takes seconds to start); where Ray is not installed (or is, but does not import),
    every `ray` test skips with what to install (CI installs Ray, so they run there)."""
    ray_usable = None
    for item in items:
        if "ray_address" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.ray)
        if item.get_closest_marker("ray"):
            item.add_marker(pytest.mark.slow)
            if ray_usable is None:
                ray_usable = _ray_imports()
            if not ray_usable:
                item.add_marker(pytest.mark.skip(reason=RAY_MISSING))


def _ray_imports() -> bool:
    """Whether `import ray` works, tried in a process of its own (this one stays free of Ray: it forks
    local workers): a half-installed Ray is found by find_spec yet raises ImportError on import."""
    if importlib.util.find_spec("ray") is None:
        return False
    return subprocess.run([sys.executable, "-c", "import ray"], capture_output=True).returncode == 0


RAY_HEAD = """
import logging, sys, ray
ray.init(num_cpus=2, include_dashboard=False, logging_level=logging.ERROR)
print(ray.get_runtime_context().gcs_address, flush=True)
sys.stdin.read()  # until the tests close our stdin
ray.shutdown()
"""


@pytest.fixture(scope="session")
def ray_address():
    """The address of a local 2-CPU Ray cluster in a process of its own, which Ray runs join with
    `ray_address`. One for the whole session, started when the first test asks for it.

    The test process itself never stays connected: forking local workers from a process connected
    to Ray breaks later Ray Data runs in it, and the local runs fork."""
    pytest.importorskip("ray", reason=RAY_MISSING)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RAY_AUTH_MODE", "disabled")  # a loopback test cluster: no token to hand around
        head = subprocess.Popen([sys.executable, "-c", RAY_HEAD], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True)
        try:
            address = head.stdout.readline().strip()
            assert address, "the test Ray cluster did not start"
            yield address
        finally:
            head.stdin.close()
            try:
                head.wait(timeout=60)
            except subprocess.TimeoutExpired:
                head.kill()
                head.wait()


@pytest.fixture
def write_jsonl():
    """write_jsonl(path, records) -> path: one JSON object per line."""
    return write_jsonl_file


@pytest.fixture
def read_jsonl():
    """read_jsonl(path) -> list of records (NaN accepted, as djx writes it)."""
    return read_jsonl_file


@pytest.fixture
def make_image(tmp_path):
    """make_image(name, (width, height), color='red', folder=tmp_path/'images') -> Path."""

    def make(name: str, size: tuple[int, int], color: str = "red", folder: Path | None = None) -> Path:
        path = Path(folder or tmp_path / "images") / name
        path.parent.mkdir(parents=True, exist_ok=True)
        Image.new("RGB", size, color).save(path)
        return path

    return make


@pytest.fixture
def write_recipe():
    """write_recipe(path, **keys) -> path: the keys dumped as a YAML recipe."""

    def write(path: Path, **keys) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(keys, sort_keys=False), encoding="utf-8")
        return path

    return write


@dataclass
class CliResult:
    rc: int
    out: str
    err: str


@pytest.fixture
def djx_cli(capsys):
    """djx_cli('process', 'recipe.yaml', ...) runs `djx` in this process -> CliResult(rc, out, err)."""
    from djx.cli import main

    def run(*args) -> CliResult:
        capsys.readouterr()
        rc = main([str(a) for a in args])
        out, err = capsys.readouterr()
        return CliResult(rc, out, err)

    return run


@pytest.fixture
def plugin_site(monkeypatch):
    """Put the folder of the importable plug-in module `djx_test_plugin_ops` on sys.path."""
    monkeypatch.syspath_prepend(str(PLUGIN_SITE))
    return PLUGIN_SITE


@pytest.fixture(scope="session")
def plugin_project(tmp_path_factory) -> Path:
    """A user's project folder holding plugins/my_ops.py. One per session: a plug-in file is
    imported once per process, keyed by its absolute path, so every test uses this same copy."""
    root = tmp_path_factory.mktemp("project")
    (root / "plugins").mkdir()
    shutil.copy(PLUGINS_DIR / "my_ops.py", root / "plugins" / "my_ops.py")
    return root


@dataclass
class TextDataset:
    """data.jsonl with `id`s and texts of known lengths, plus a few broken lines and blank lines."""
    path: Path
    texts: dict = field(default_factory=dict)   # id -> text, for the lines that parse
    records: int = 0                            # input samples (non-blank lines)
    bad_lines: int = 0                          # lines that are not JSON objects
    blank_lines: int = 0

    def kept_ids(self, min_len: int, max_len: int = 10 ** 9) -> list[int]:
        return [i for i, t in self.texts.items() if min_len <= len(t) <= max_len]


def build_text_dataset(path: Path, n: int = 60) -> TextDataset:
    ds = TextDataset(Path(path))
    lines = []
    for i in range(n):
        if i % 17 == 5:
            lines.append("this line is not JSON {")
            ds.bad_lines += 1
        elif i % 23 == 7:
            lines.append("[1, 2, 3]")
            ds.bad_lines += 1
        else:
            ds.texts[i] = "abcdefghijk"[: i % 12]
            lines.append(json.dumps({"id": i, "text": ds.texts[i]}))
        ds.records += 1
        if i % 10 == 9:
            lines.append("")
            ds.blank_lines += 1
    ds.path.parent.mkdir(parents=True, exist_ok=True)
    ds.path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return ds


@pytest.fixture
def text_dataset(tmp_path) -> TextDataset:
    return build_text_dataset(tmp_path / "data" / "data.jsonl")


@pytest.fixture
def mm_records(make_image, tmp_path) -> list[dict]:
    """Image-text records (image paths relative to tmp_path, where the dataset file goes), each
    with an `expect` field saying what the standard mm chain (see mm_process) does with it."""
    make_image("big.png", (64, 64))
    make_image("small.png", (16, 16), "blue")
    make_image("wide.png", (128, 40), "green")
    base = [
        {"text": LONG, "images": ["images/big.png"], "expect": "kept"},
        {"text": "hi", "images": ["images/big.png"], "expect": "text_length_filter"},
        {"text": LONG, "images": ["images/small.png"], "expect": "image_shape_filter"},
        {"text": LONG, "images": ["images/wide.png"], "expect": "image_aspect_ratio_filter"},
        {"text": LONG, "images": ["images/missing.png"], "expect": "rejected"},
        {"text": LONG, "images": [], "expect": "kept"},
        {"text": LONG, "images": ["images/small.png", "images/big.png"], "expect": "kept"},
        {"text": 42, "images": ["images/big.png"], "expect": "rejected"},
    ]
    return [dict(r, id=k * len(base) + j) for k in range(4) for j, r in enumerate(base)]


@pytest.fixture
def mm_process() -> list[dict]:
    """The standard image-text chain the `expect` fields of mm_records refer to."""
    return [{"text_length_filter": {"min_len": 5}},
            {"image_shape_filter": {"min_width": 32, "min_height": 32}},
            {"image_aspect_ratio_filter": {"min_ratio": 0.5, "max_ratio": 2.0}}]
