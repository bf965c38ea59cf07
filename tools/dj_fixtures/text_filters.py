"""Regenerate tests/assets/dj_fixtures/text_filters.json: Data-Juicer 1.6.1's own stats and verdicts
for the model-free text filters over tests/assets/dj_fixtures/texts.jsonl, each in several settings.

Run with Data-Juicer's interpreter (its venv needs `sentencepiece` for the tokenization settings):
    HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 /work/dj-venv/bin/python tools/dj_fixtures/text_filters.py
        [--rebuild-resources]

Each case is run through Data-Juicer's Filter.run on a dataset of all the texts: once without reducing
(the stats of every text) and once reducing (the texts it keeps). The cases' params are djx's;
resources are named by placeholders the test resolves alike: @words (flagged/stopword lists),
@sp_model (a SentencePiece model), @tokenizer (a Hugging Face tokenizer folder). Data-Juicer has no
parameter for the SentencePiece model (it loads `{lang}.sp.model` from its models cache) nor for
alphanumeric_filter's tokenizer (hard-coded EleutherAI/pythia-6.9b-deduped): this script puts the same
files where Data-Juicer looks for them, and leaves out the djx-only parameters.
"""
from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ASSETS = REPO / "tests" / "assets" / "dj_fixtures"
RESOURCES = ASSETS / "text_resources"
PYTHIA = "EleutherAI/pythia-6.9b-deduped"
DJX_ONLY = {"tokenizer_model", "hf_tokenizer"}  # not Data-Juicer parameters of these ops (but token_num's)

W, SP, TOK = "@words", "@sp_model", "@tokenizer"
CASES = [
    ("alphanumeric_filter", {}),
    ("alphanumeric_filter", {"min_ratio": 0.5, "max_ratio": 0.9}),
    ("alphanumeric_filter", {"tokenization": True, "hf_tokenizer": TOK}),
    ("alphanumeric_filter", {"tokenization": True, "hf_tokenizer": TOK, "min_ratio": 1.5, "max_ratio": 3.0}),
    ("character_repetition_filter", {}),
    ("character_repetition_filter", {"rep_len": 3, "max_ratio": 0.3}),
    ("character_repetition_filter", {"rep_len": 1, "min_ratio": 0.1, "max_ratio": 0.6}),
    ("special_characters_filter", {}),
    ("special_characters_filter", {"min_ratio": 0.05, "max_ratio": 0.4}),
    ("word_repetition_filter", {}),
    ("word_repetition_filter", {"rep_len": 2, "max_ratio": 0.3}),
    ("word_repetition_filter", {"rep_len": 1, "min_ratio": 0.2}),
    ("word_repetition_filter", {"tokenization": True, "tokenizer_model": SP, "rep_len": 3}),
    ("words_num_filter", {}),
    ("words_num_filter", {"min_num": 3, "max_num": 40}),
    ("words_num_filter", {"tokenization": True, "tokenizer_model": SP, "min_num": 5, "max_num": 100}),
    ("flagged_words_filter", {"flagged_words_dir": W}),
    ("flagged_words_filter", {"flagged_words_dir": W, "max_ratio": 0.1, "use_words_aug": True,
                              "words_aug_group_sizes": [2, 3], "words_aug_join_char": " "}),
    ("flagged_words_filter", {"flagged_words_dir": W, "lang": "all"}),
    ("flagged_words_filter", {"flagged_words_dir": W, "lang": "zh", "use_words_aug": True,
                              "words_aug_group_sizes": [2], "max_ratio": 0.01}),
    ("flagged_words_filter", {"flagged_words_dir": W, "tokenization": True, "tokenizer_model": SP}),
    ("stopwords_filter", {"stopwords_dir": W}),
    ("stopwords_filter", {"stopwords_dir": W, "lang": "all", "min_ratio": 0.1, "max_ratio": 0.5}),
    ("stopwords_filter", {"stopwords_dir": W, "lang": "zh", "use_words_aug": True, "min_ratio": 0.0,
                          "max_ratio": 0.2}),
    ("stopwords_filter", {"stopwords_dir": W, "tokenization": True, "tokenizer_model": SP, "min_ratio": 0.1}),
    ("token_num_filter", {"hf_tokenizer": TOK}),
    ("token_num_filter", {"hf_tokenizer": TOK, "min_num": 5, "max_num": 50}),
    ("average_line_length_filter", {}),
    ("average_line_length_filter", {"min_len": 5, "max_len": 40}),
    ("maximum_line_length_filter", {}),
    ("maximum_line_length_filter", {"min_len": 5, "max_len": 60}),
]
PLACES = {W: "words", SP: "en.sp.model", TOK: "tokenizer"}
STAT = {"alphanumeric_filter": None, "character_repetition_filter": "char_rep_ratio",
        "special_characters_filter": "special_char_ratio", "word_repetition_filter": "word_rep_ratio",
        "words_num_filter": "num_words", "flagged_words_filter": "flagged_words_ratio",
        "stopwords_filter": "stopwords_ratio", "token_num_filter": "num_token",
        "average_line_length_filter": "avg_line_length", "maximum_line_length_filter": "max_line_length"}


def build_resources() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from word_resources import build_all
    shutil.rmtree(RESOURCES, ignore_errors=True)
    build_all(RESOURCES)
    (RESOURCES / "en.sp.vocab").unlink(missing_ok=True)


def dj_params(op: str, params: dict) -> dict:
    out = {}
    for k, v in params.items():
        if k in DJX_ONLY and not (op == "token_num_filter" and k == "hf_tokenizer"):
            continue
        if v == TOK:
            out[k] = PYTHIA  # the working copy, which has the config.json Data-Juicer's loader wants
        else:
            out[k] = str(RESOURCES / PLACES[v]) if isinstance(v, str) and v in PLACES else v
    return out


def run_case(op_name: str, params: dict, rows: list[dict]) -> dict:
    from data_juicer.core.data import NestedDataset
    from data_juicer.ops import load_ops
    (op,) = load_ops([{op_name: {**dj_params(op_name, params), "num_proc": 1}}])
    stats_ds = op.run(NestedDataset.from_list(rows), reduce=False)
    kept_ds = op.run(NestedDataset.from_list(rows))
    stat = STAT[op_name] or ("alpha_token_ratio" if params.get("tokenization") else "alnum_ratio")
    stats = [s["__dj__stats__"][stat] for s in stats_ds.to_list()]
    assert len(stats) == len(rows), (op_name, params)
    return {"op": op_name, "params": params, "stat": stat, "stats": stats,
            "kept": [s["id"] for s in kept_ds.to_list()]}


def main() -> None:
    if "--rebuild-resources" in sys.argv or not RESOURCES.exists():
        build_resources()
    rows = [json.loads(line) for line in (ASSETS / "texts.jsonl").read_text(encoding="utf-8").splitlines()]
    work = Path(tempfile.mkdtemp(prefix="djfix_"))
    # Data-Juicer looks for `en.sp.model` in the working folder, and loads its hard-coded hub id as a
    # local folder when one of that name is under the working folder.
    shutil.copy(RESOURCES / "en.sp.model", work / "en.sp.model")
    shutil.copytree(RESOURCES / "tokenizer", work / PYTHIA)
    # Data-Juicer loads it with AutoProcessor, which wants a model type to pick a processor by.
    (work / PYTHIA / "config.json").write_text(json.dumps({"model_type": "gpt_neox"}))
    os.chdir(work)
    import data_juicer
    cases = [run_case(op, params, rows) for op, params in CASES]
    out = {"data_juicer": data_juicer.__version__, "texts": "texts.jsonl", "cases": cases}
    (ASSETS / "text_filters.json").write_text(json.dumps(out, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    shutil.rmtree(work)
    print(f"{len(cases)} cases, {len(rows)} texts -> {ASSETS / 'text_filters.json'}")


if __name__ == "__main__":
    main()
