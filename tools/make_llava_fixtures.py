"""Regenerate tests/assets/dj_fixtures/llava_conversion.json: what Data-Juicer's own LLaVA tools make
of a few LLaVA records, for tests/test_llava_format.py to compare djx's mapping against.

    DJ_VENV/bin/python tools/make_llava_fixtures.py --dj-repo DATA_JUICER_CHECKOUT

Runs, in the Data-Juicer venv (it needs `fire`, `jsonlines`, `regex`, `loguru`, `tqdm`),
tools/fmt_conversion/multimodal/source_format_to_data_juicer_format/llava_to_dj.py and
.../data_juicer_format_to_target_format/dj_to_llava.py of the given checkout (a work tree or a bare
clone: the files are read with `git show HEAD:...`) over the records below, once per parameter set,
and writes each set's Data-Juicer records and what dj_to_llava makes of them again.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "tests" / "assets" / "dj_fixtures" / "llava_conversion.json"
TO_DJ = "tools/fmt_conversion/multimodal/source_format_to_data_juicer_format/llava_to_dj.py"
TO_LLAVA = "tools/fmt_conversion/multimodal/data_juicer_format_to_target_format/dj_to_llava.py"

RECORDS = [
    {"id": "000000033471", "image": "coco/train2017/000000033471.jpg", "conversations": [
        {"from": "human", "value": "<image>\nWhat are the colors of the bus in the image?"},
        {"from": "gpt", "value": "The bus in the image is white and red."},
        {"from": "human", "value": "What feature can be seen on the back of the bus?"},
        {"from": "gpt", "value": "The back of the bus features an advertisement."}]},
    {"id": 4242, "image": "gqa/images/2354786.jpg", "conversations": [
        {"from": "human", "value": "Is the sky dark?\n<image>"},
        {"from": "gpt", "value": " Yes, it is dark. "}]},
    {"id": "GCC_train_002582585", "image": "00258/002582585.jpg", "model": "", "conversations": [
        {"from": "human", "value": "Provide a brief description of the given image.\n<image>"},
        {"from": "gpt", "value": "olive oil is a healthy ingredient used liberally ."}]},
    {"id": "text-only-1", "conversations": [
        {"from": "human", "value": "Say hello."}, {"from": "gpt", "value": "Hello."},
        {"from": "human", "value": "Again."}, {"from": "gpt", "value": "Hello again."}]},
]

PARAMS = [
    {},
    {"only_keep_caption": True},
    {"split_chunk": True},
    {"split_chunk": True, "image_broadcast": True, "image_broadcast_pos": "before"},
    {"split_chunk": True, "image_broadcast": True, "image_broadcast_pos": "after"},
    {"split_chunk": True, "image_broadcast": True, "image_broadcast_pos": "follow"},
    {"add_eoc_at_last": False, "str_id": False},
]


def _load(repo: str, rel: str, folder: str):
    path = os.path.join(folder, os.path.basename(rel))
    Path(path).write_bytes(subprocess.run(["git", "-C", repo, "show", f"HEAD:{rel}"], check=True,
                                          capture_output=True).stdout)
    spec = importlib.util.spec_from_file_location(Path(rel).stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _read_jsonl(path: str) -> list:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dj-repo", required=True, help="a data-juicer checkout or bare clone")
    args = ap.parse_args()
    import data_juicer
    commit = subprocess.run(["git", "-C", args.dj_repo, "rev-parse", "HEAD"], check=True, capture_output=True,
                            text=True).stdout.strip()
    cases = []
    with tempfile.TemporaryDirectory() as tmp:
        to_dj, to_llava = _load(args.dj_repo, TO_DJ, tmp), _load(args.dj_repo, TO_LLAVA, tmp)
        src = os.path.join(tmp, "llava.json")
        Path(src).write_text(json.dumps(RECORDS), encoding="utf-8")
        for params in PARAMS:
            dj_path, back_path = os.path.join(tmp, "dj.jsonl"), os.path.join(tmp, "back.json")
            to_dj.main(src, dj_path, **params)
            back_params = {"restore_questions": True, "original_llava_ds_path": src} \
                if params.get("only_keep_caption") else {}
            to_llava.main(dj_path, back_path, **back_params)
            cases.append({"params": params, "back_params": {k: v for k, v in back_params.items()
                                                            if k == "restore_questions"},
                          "dj": _read_jsonl(dj_path), "back": json.loads(Path(back_path).read_text("utf-8"))})
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({"source": f"data-juicer {data_juicer.__version__}, tools at commit {commit}",
                               "input": RECORDS, "cases": cases}, indent=1, ensure_ascii=False) + "\n",
                   encoding="utf-8")
    print(f"wrote {OUT} ({len(cases)} cases)", file=sys.stderr)


if __name__ == "__main__":
    main()
