"""Regenerate tests/assets/dj_fixtures/mappers.json: Data-Juicer 1.6.1's own output of each text
mapper (with the parameters below) on the texts of mapper_texts.json, run through `dj-process`.

    /work/dj-venv/bin/python tools/dj_fixtures/mappers.py [--dj-venv /work/dj-venv]

Each configuration is one Data-Juicer run (np 1, no fusion, no cache, op errors not skipped) whose
export must hold one row per input text, in order; otherwise the script exits with status 1.
The "tokens" texts hold djx's special tokens: Data-Juicer maps them as ordinary text, and the test
compares djx to it outside the tokens (docs/ops.md, "Mappers and special tokens").
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
OUT = ROOT / "tests" / "assets" / "dj_fixtures" / "mappers.json"
CONFIGS = [
    ("fix_unicode_mapper", {}),
    ("fix_unicode_mapper", {"normalization": "NFKC"}),
    ("punctuation_normalization_mapper", {}),
    ("whitespace_normalization_mapper", {}),
    ("clean_links_mapper", {}),
    ("clean_links_mapper", {"repl": "<LINK>"}),
    ("clean_email_mapper", {}),
    ("clean_email_mapper", {"repl": "[EMAIL]"}),
    ("clean_html_mapper", {}),
    ("clean_copyright_mapper", {}),
    ("remove_long_words_mapper", {}),
    ("remove_long_words_mapper", {"min_len": 3, "max_len": 12}),
    ("remove_words_with_incorrect_substrings_mapper", {}),
    ("remove_words_with_incorrect_substrings_mapper", {"substrings": ["oo", "-", "é"]}),
    ("remove_words_with_incorrect_substrings_mapper", {"tokenization": True, "tokenizer_model": "@sp_model",
                                                       "substrings": ["is", "om", "th", "ave"]}),
]
# "@sp_model": the tests' SentencePiece model (tests/assets/dj_fixtures/text_resources/en.sp.model), which
# Data-Juicer has no parameter for: it is put in the models cache Data-Juicer reads it from, as en.sp.model
SP_MODEL = ROOT / "tests" / "assets" / "dj_fixtures" / "text_resources" / "en.sp.model"
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "UV_OFFLINE": "1",
           "PIP_NO_INDEX": "1"}


def run_dj(venv: Path, texts: list[str], op: str, params: dict, work: Path) -> list[str]:
    import shutil
    import yaml
    work.mkdir(parents=True)
    env = {**os.environ, **OFFLINE}
    if params.get("tokenizer_model") == "@sp_model":
        params = {k: v for k, v in params.items() if k != "tokenizer_model"}
        (work / "models").mkdir()
        shutil.copy(SP_MODEL, work / "models" / "en.sp.model")
        env["DATA_JUICER_MODELS_CACHE"] = str(work / "models")
    (work / "in.jsonl").write_text("".join(json.dumps({"id": i, "text": t}, ensure_ascii=False) + "\n"
                                           for i, t in enumerate(texts)), encoding="utf-8")
    recipe = {"project_name": "mappers_fixture", "dataset_path": str(work / "in.jsonl"),
              "export_path": str(work / "out.jsonl"), "work_dir": str(work), "np": 1,
              "skip_op_error": False, "op_fusion": False, "use_cache": False, "open_monitor": False,
              "open_tracer": False, "keep_stats_in_res_ds": True, "process": [{op: params}]}
    (work / "recipe.yaml").write_text(yaml.safe_dump(recipe, allow_unicode=True), encoding="utf-8")
    proc = subprocess.run([str(venv / "bin" / "dj-process"), "--config", str(work / "recipe.yaml")],
                          env=env, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        sys.exit(f"Data-Juicer failed on {op} {params}:\n{proc.stderr[-3000:]}")
    rows = [json.loads(line) for line in (work / "out.jsonl").read_text(encoding="utf-8").split("\n") if line]
    if [r["id"] for r in rows] != list(range(len(texts))):
        sys.exit(f"{op} {params}: Data-Juicer's export has ids {[r['id'] for r in rows]}, not one row per input")
    return [r["text"] for r in rows]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dj-venv", default="/work/dj-venv", type=Path)
    args = ap.parse_args()
    import data_juicer
    texts = json.loads((HERE / "mapper_texts.json").read_text(encoding="utf-8"))
    cases = []
    with tempfile.TemporaryDirectory() as tmp:
        for n, (op, params) in enumerate(CONFIGS):
            both = run_dj(args.dj_venv, texts["plain"] + texts["tokens"], op, params, Path(tmp) / str(n))
            out = {"plain": both[:len(texts["plain"])], "tokens": both[len(texts["plain"]):]}
            cases.append({"op": op, "params": params, "output": out})
            print(f"{op} {params}: done", flush=True)
    fixture = {"data_juicer": data_juicer.__version__, "texts": texts, "cases": cases}
    OUT.write_text(json.dumps(fixture, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
