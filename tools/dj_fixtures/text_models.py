"""Regenerate tests/assets/dj_fixtures/text_models.json: Data-Juicer 1.6.1's own stats and verdicts
of language_id_score_filter, perplexity_filter, text_action_filter and text_entity_dependency_filter,
run through `dj-process` on the tiny resources tests/text_resources.py builds.

    /work/dj-venv/bin/python tools/dj_fixtures/text_models.py [--dj-venv /work/dj-venv]

Data-Juicer's venv needs fasttext-predict, ufal.kenlm, sentencepiece and spacy. The resources are
put where Data-Juicer looks before it downloads (DATA_JUICER_MODELS_CACHE) under the names it asks
for (lid.176.bin, en.sp.model, en.arpa.bin, en_core_web_md-3.7.0.tar.gz). Each configuration is one
run (np 1, no fusion, no cache, op errors not skipped); a run whose export is not the expected ids
in order exits with status 1. The fixture records the resources' sha256 (and the spaCy pipeline's
annotations) so the test knows it rebuilt the same ones.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(ROOT / "tests"))
import text_resources as R  # noqa: E402

OUT = ROOT / "tests" / "assets" / "dj_fixtures" / "text_models.json"
KEEP_ALL = 1e300
CONFIGS = [  # (op, params, texts); the first of each op keeps every text with an entity (its stats)
    ("language_id_score_filter", {"lang": "", "min_score": 0.0}, "lid"),
    ("language_id_score_filter", {"lang": ["en", "de"], "min_score": 0.5}, "lid"),
    ("language_id_score_filter", {"lang": "fr", "min_score": 0.0}, "lid"),
    ("perplexity_filter", {"lang": "en", "min_ppl": 0, "max_ppl": KEEP_ALL}, "ppl"),
    ("perplexity_filter", {"lang": "en", "min_ppl": 3, "max_ppl": 10}, "ppl"),
    ("text_action_filter", {"lang": "en", "min_action_num": 0}, "spacy"),
    ("text_action_filter", {"lang": "en", "min_action_num": 2}, "spacy"),
    ("text_entity_dependency_filter", {"lang": "en", "min_dependency_num": 0, "any_or_all": "any"}, "spacy"),
    ("text_entity_dependency_filter", {"lang": "en", "min_dependency_num": 2, "any_or_all": "any"}, "spacy"),
    ("text_entity_dependency_filter", {"lang": "en", "min_dependency_num": 2, "any_or_all": "all"}, "spacy"),
]
TEXTS = {"lid": R.LID_TEXTS, "ppl": R.PPL_TEXTS, "spacy": R.SPACY_TEXTS}
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "UV_OFFLINE": "1",
           "PIP_NO_INDEX": "1"}


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def build_resources(cache: Path, work: Path) -> dict:
    """Data-Juicer's model cache holding the tiny resources; their hashes and spaCy annotations."""
    cache.mkdir(parents=True)
    lid = R.write_fasttext_lid(cache / "lid.176.bin")
    sp = R.train_sentencepiece(cache / "en.sp.model")
    arpa = R.write_arpa(cache / "en.arpa.bin", sp)  # KenLM reads ARPA text whatever the file's name
    pipe = R.train_spacy_pipeline(work / "pipeline")
    name = "en_core_web_md-3.7.0"
    with tarfile.open(cache / f"{name}.tar.gz", "w:gz") as tar:  # the layout Data-Juicer unpacks
        tar.add(pipe, arcname=f"{name}/en_core_web_md/{name}")
    import spacy
    nlp = spacy.load(pipe)
    return {"sha256": {"fasttext_lid": sha256(lid), "sentencepiece": sha256(sp), "arpa": sha256(arpa)},
            "spacy_annotations": [R.spacy_annotations(nlp, t) for t in R.SPACY_TEXTS]}


def run_dj(venv: Path, cache: Path, texts: list[str], op: str, params: dict, work: Path) -> list[dict]:
    """Data-Juicer's export rows (the kept texts, with stats) of one op over `texts`."""
    import yaml
    work.mkdir(parents=True)
    (work / "in.jsonl").write_text("".join(json.dumps({"id": i, "text": t}, ensure_ascii=False) + "\n"
                                           for i, t in enumerate(texts)), encoding="utf-8")
    recipe = {"project_name": "text_models_fixture", "dataset_path": str(work / "in.jsonl"),
              "export_path": str(work / "out.jsonl"), "work_dir": str(work), "np": 1,
              "skip_op_error": False, "op_fusion": False, "use_cache": False, "open_monitor": False,
              "open_tracer": False, "keep_stats_in_res_ds": True, "process": [{op: params}]}
    (work / "recipe.yaml").write_text(yaml.safe_dump(recipe, allow_unicode=True), encoding="utf-8")
    env = {**os.environ, **OFFLINE, "DATA_JUICER_MODELS_CACHE": str(cache)}
    proc = subprocess.run([str(venv / "bin" / "dj-process"), "--config", str(work / "recipe.yaml")],
                          env=env, capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        sys.exit(f"Data-Juicer failed on {op} {params}:\n{proc.stderr[-3000:]}")
    out = work / "out.jsonl"
    return [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines() if line] if out.exists() else []


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dj-venv", default="/work/dj-venv", type=Path)
    args = ap.parse_args()
    import data_juicer
    cases = []
    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(tmp) / "models"
        resources = build_resources(cache, Path(tmp))
        for n, (op, params, kind) in enumerate(CONFIGS):
            rows = run_dj(args.dj_venv, cache, TEXTS[kind], op, params, Path(tmp) / f"run{n}")
            ids = [r["id"] for r in rows]
            if ids != sorted(set(ids)):
                sys.exit(f"{op} {params}: Data-Juicer's export has ids {ids}, not kept inputs in order")
            cases.append({"op": op, "params": params, "texts": kind, "kept": ids,
                          "stats": {str(r["id"]): r["__dj__stats__"] for r in rows}})
            print(f"{op} {params}: kept {ids}", flush=True)
    fixture = {"data_juicer": data_juicer.__version__, "resources": resources, "texts": TEXTS, "cases": cases}
    OUT.write_text(json.dumps(fixture, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
