"""Resource files a recipe names (word lists, tokenizer models) may be someone else's: the viewers
of a received run (`djx check`, `analyze`, `explain`) open none of them, their verdicts come from
the stats; a run opens each as images are opened (once, non-blocking, a regular file checked on
the open descriptor, under a size cap) and refuses a FIFO or a device in one line. Each command
runs in a child process whose cap is only a hang guard: before, a FIFO held all of them forever."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

DJX = [sys.executable, "-m", "djx.cli"]


def djx(*args, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run(DJX + [str(a) for a in args], capture_output=True, text=True, timeout=120, cwd=cwd)


@pytest.fixture
def received_run(tmp_path) -> tuple[Path, Path]:
    """A finished run of flagged_words_filter whose word list has since become a FIFO.
    -> (export, the word list)"""
    words = tmp_path / "words"
    words.mkdir()
    (words / "flagged_words.json").write_text(json.dumps({"en": ["badword"]}))
    (tmp_path / "d.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in
                                              ["a clean text here", "badword badword badword"]))
    (tmp_path / "r.yaml").write_text(yaml.safe_dump({
        "dataset_path": "d.jsonl", "export_path": "out/o.jsonl", "np": 1,
        "process": [{"flagged_words_filter": {"flagged_words_dir": "words", "max_ratio": 0.5}}]}))
    done = djx("process", tmp_path / "r.yaml", "--quiet")
    assert done.returncode == 0, done.stderr
    (words / "flagged_words.json").unlink()
    os.mkfifo(words / "flagged_words.json")
    return tmp_path / "out" / "o.jsonl", words / "flagged_words.json"


@pytest.mark.slow  # over a second: the full suite's (docs/development.md)
def test_viewers_of_a_received_run_open_no_word_list(received_run, tmp_path):
    export, _ = received_run
    checked = djx("check", export)
    assert checked.returncode == 0, checked.stderr
    analyzed = djx("analyze", export, "--out", tmp_path / "analysis")
    assert analyzed.returncode == 0, analyzed.stderr
    explained = djx("explain", export, "1")
    assert explained.returncode == 0, explained.stderr
    assert "flagged_words_filter" in explained.stdout and "flagged_words_ratio" in explained.stdout


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_a_run_refuses_a_word_list_that_is_not_a_regular_file(received_run, tmp_path, kind):
    export, word_list = received_run
    if kind == "device":
        word_list.unlink()
        word_list.symlink_to("/dev/zero")
    done = djx("process", tmp_path / "r.yaml", "--quiet")
    assert done.returncode != 0
    assert "djx: error:" in done.stderr and "not a regular file" in done.stderr
    assert ("a FIFO" if kind == "fifo" else "a device") in done.stderr and "Traceback" not in done.stderr


def test_a_tokenizer_model_that_is_a_fifo_is_refused(tmp_path):
    pytest.importorskip("sentencepiece")
    os.mkfifo(tmp_path / "en.sp.model")
    (tmp_path / "d.jsonl").write_text(json.dumps({"text": "some words"}) + "\n")
    (tmp_path / "r.yaml").write_text(yaml.safe_dump({
        "dataset_path": "d.jsonl", "export_path": "out/o.jsonl", "np": 1,
        "process": [{"words_num_filter": {"tokenization": True, "tokenizer_model": "en.sp.model"}}]}))
    done = djx("process", tmp_path / "r.yaml", "--quiet")
    assert done.returncode != 0 and "not a regular file" in done.stderr and "a FIFO" in done.stderr
