"""A `ray_address` where nothing listens fails in seconds with one line (Ray's client would retry
it for minutes), and an address that is not one says what an address looks like."""
from __future__ import annotations

import socket
import subprocess
import sys

import pytest

pytestmark = pytest.mark.ray  # where Ray is absent or does not import, conftest skips these tests


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # free, and nothing listens once it is closed


@pytest.mark.parametrize("address", ["127.0.0.1:{port}", "ray://127.0.0.1:{port}", "no-port-here"])
def test_an_address_where_nothing_listens_fails_at_once(tmp_path, write_jsonl, write_recipe, address):
    data = write_jsonl(tmp_path / "d.jsonl", [{"text": "a text long enough"}])
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path=str(data), export_path="out/o.jsonl", executor="ray",
                          ray_address=address.format(port=closed_port()), process=[{"text_length_filter": {}}])
    # the timeout only guards against the old behaviour (minutes of retries): the state awaited is the exit
    res = subprocess.run([sys.executable, "-m", "djx.cli", "process", str(recipe), "--quiet"],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 1 and "Traceback" not in res.stderr
    assert res.stderr.startswith("djx: error: ray_address ")
    assert ("nothing answers" in res.stderr) or ("expected host:port" in res.stderr)


def test_a_json_array_input_is_refused_at_load_and_in_the_dry_run_before_ray_starts(tmp_path, write_recipe):
    """Ray reads JSON Lines: LLaVA's .json array was refused only after Ray had started (10 s)."""
    import json
    data = tmp_path / "llava.json"
    data.write_text(json.dumps([{"id": "1", "image": "a.jpg", "conversations": [
        {"from": "human", "value": "<image>\nwhat?"}, {"from": "gpt", "value": "a cat"}]}]))
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path=str(data), export_path="out/o.jsonl", executor="ray",
                          dataset_format="llava", process=[{"text_length_filter": {}}])
    dry = subprocess.run([sys.executable, "-m", "djx.cli", "process", str(recipe), "--dry-run"],
                         capture_output=True, text=True, timeout=120)
    assert dry.returncode == 1 and "problem: " in dry.stdout and "reads JSON Lines" in dry.stdout
    res = subprocess.run([sys.executable, "-m", "djx.cli", "process", str(recipe), "--quiet"],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 1 and "Traceback" not in res.stderr
    assert res.stderr.startswith("djx: error: ") and "reads JSON Lines" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out" / "o.ray.log").exists()  # Ray never started
