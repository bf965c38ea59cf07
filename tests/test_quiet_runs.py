"""A run says what the user can act on, once: no library's chatter from each worker (transformers'
image-processor fallback, KenLM's loading advice and progress bar on stderr), and KenLM's advice
as one note in the plan."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import text_resources as R

ASSETS = Path(__file__).parent / "assets"
MODELS = ASSETS / "models"


@pytest.mark.slow
@pytest.mark.models
def test_a_run_with_two_workers_prints_no_library_noise_and_kenlms_advice_once(tmp_path):
    pytest.importorskip("kenlm")
    sp = R.train_sentencepiece(tmp_path / "en.sp.model")
    arpa = R.write_arpa(tmp_path / "en.arpa", sp)
    rows = (ASSETS / "demo" / "demo.jsonl").read_text().splitlines(keepends=True)[:8]
    (tmp_path / "d.jsonl").write_text("".join(rows))
    (tmp_path / "r.yaml").write_text(yaml.safe_dump({
        "dataset_path": "d.jsonl", "export_path": "out/o.jsonl", "np": 2, "image_root": str(ASSETS / "demo"),
        "process": [{"perplexity_filter": {"sp_model_path": str(sp), "kenlm_model_path": str(arpa), "max_ppl": 1e9}},
                    {"image_aesthetics_filter": {"hf_scorer_model": str(MODELS / "tiny-aesthetics-predictor-v2-linear"),
                                                 "min_score": -100, "max_score": 100}}]}))
    proc = subprocess.run([sys.executable, "-m", "djx.cli", "process", "r.yaml", "--quiet"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300, env=dict(os.environ, HF_HUB_OFFLINE="1"))
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((tmp_path / "out" / "o.summary.json").read_text())
    assert summary["kept"] == 8 and summary["workers"] == 2
    assert proc.stderr == "", proc.stderr  # nothing from transformers or KenLM, in any worker
    advice = [line for line in proc.stdout.splitlines() if "build_binary" in line]
    assert len(advice) == 1 and "perplexity_filter" in advice[0] and str(arpa) in advice[0]
    assert "----5---10" not in proc.stdout and "Loading the LM" not in proc.stdout
