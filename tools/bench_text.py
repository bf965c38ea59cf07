"""djx side by side with Data-Juicer on the text ops of the LLaVA pretrain refinement recipe.

    python tools/bench_text.py [--n 100000] [--np CORES] [--only djx|dj] [--keep] [--dj-venv /work/dj-venv]

Both tools run the recipe's text ops (tests/assets/dj_recipes/llava-pretrain-refine.yaml, its
parameters unchanged: fix_unicode_mapper, punctuation_normalization_mapper, alphanumeric_filter,
character_repetition_filter, flagged_words_filter, perplexity_filter, special_characters_filter,
word_repetition_filter) over the same n generated LLaVA-pretrain-like captions ({"id", "text"}
records, no images), each as its own command (`djx process`, `dj-process`), so imports and model
loading count on both sides. The resources Data-Juicer downloads are built here: a flagged-words
list (tools/dj_fixtures/word_resources.py), a tiny SentencePiece model and an ARPA model over its
pieces (tests/text_resources.py). djx gets them by path parameters; Data-Juicer by
`flagged_words_dir` and its model cache (DATA_JUICER_MODELS_CACHE) under the names it asks for.
Reported: wall seconds, samples/s, peak PSS of each process tree, the djx/Data-Juicer ratios, and
whether both kept the same samples (count, ids) with the same texts.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[1]
RECIPE = REPO / "tests" / "assets" / "dj_recipes" / "llava-pretrain-refine.yaml"
TEXT_OPS = ("fix_unicode_mapper", "punctuation_normalization_mapper", "alphanumeric_filter",
            "character_repetition_filter", "flagged_words_filter", "perplexity_filter",
            "special_characters_filter", "word_repetition_filter")
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

SUBJECTS = ("woman|man|young girl|old house|red car|wooden table|mountain lake|city street|golden retriever|"
            "bowl of soup|wedding dress|vintage poster|kitchen island|sports car|garden path|bedroom|"
            "cat|dog|river|garden|apple|bird|farmer|teacher|letter|ball").split("|")
ADJECTIVES = ("beautiful|modern|small|large|vintage|white|black|blue|rustic|cozy|elegant|colorful|"
              "old|green|red|long|sunny|empty|wooden|abstract|little|happy").split("|")
ACTIONS = ("standing in front of|sitting on|walking along|isolated on|painted on|next to|in the middle of|"
           "looking at|covered with|surrounded by|near|under|on top of|eats|sees|walks to|finds").split("|")
PLACES = ("a white background|the beach|the snow|a brick wall|the forest|a busy road|the kitchen table|"
          "the sunset|a field of flowers|the river|the mountain|the garden|a green house|the old town").split("|")
TAILS = ("stock photo|canvas print|royalty free image|vector illustration|for sale|poster|"
         "high resolution|wallpaper|t - shirt design|3 - inch gel memory foam mattress topper").split("|")
FLAGGED = ("damn", "crap", "hell", "shitty", "buy now")  # in tools/dj_fixtures/word_resources.FLAGGED["en"]
MOJIBAKE = ("cafÃ©", "donâ€™t", "itâ€™s", "naÃ¯ve", "rÃ©sumÃ©", "Ã  la mode", "â€œbestâ€\x9d")
FANCY_PUNCT = ("“summer”", "‘new’", "–", "…", "«sale»", "，", "！", "？", "【hot】", "・")
SYMBOLS = ("★★★", "$$$", "!!!", "###", "%%%", "***", "@@@", "~~~", "|||", "+++", "***", "^^^", "&&&")
EMOJI = ("🌸", "🔥", "😍", "🎉", "☀️", "🐶", "🍕", "❤️")
UNK_LOG10 = -7.0  # log10 probability of a piece the language model never saw
GIBBERISH = "qxzj"  # letters the tiny SentencePiece model never saw


def _caption(rng: random.Random) -> str:
    """One plain caption of 2 to 40 words, lower case like most LLaVA pretrain captions."""
    parts = [rng.choice(("a", "the", "an image of a", "photo of a", "")), rng.choice(ADJECTIVES),
             rng.choice(SUBJECTS)]
    for _ in range(rng.choice((0, 0, 1, 1, 1, 2, 3))):
        parts += [rng.choice(ACTIONS), rng.choice(PLACES)]
    if rng.random() < 0.4:
        parts.append(rng.choice(TAILS))
    if rng.random() < 0.2:
        parts.insert(rng.randrange(len(parts) + 1), str(rng.randint(1, 2024)))
    if rng.random() < 0.4:
        parts.insert(rng.randrange(2, len(parts) + 1), ",")
    if rng.random() < 0.5:
        parts.append(".")
    text = " ".join(p for p in parts if p)
    return text[:rng.randint(4, 12)] if rng.random() < 0.02 else text  # a few cut-off fragments


def caption(rng: random.Random) -> str:
    """A caption, plain or with one of the oddities each filter (and each mapper) of the recipe acts on."""
    text, roll = _caption(rng), rng.random()
    words = text.split()
    if roll < 0.05:  # fix_unicode_mapper: mojibake
        words.insert(rng.randrange(len(words) + 1), rng.choice(MOJIBAKE))
    elif roll < 0.10:  # punctuation_normalization_mapper: unicode punctuation
        words.insert(rng.randrange(len(words) + 1), rng.choice(FANCY_PUNCT))
    elif roll < 0.13:  # alphanumeric_filter, special_characters_filter (max): symbols, emoji, a URL
        words += [rng.choice(SYMBOLS + EMOJI) for _ in range(rng.randint(2, 8))]
    elif roll < 0.16:
        words.append(f"https://www.{rng.choice(SUBJECTS).split()[-1]}-shop.com/img/{rng.randint(1, 10**6)}.jpg?w=640")
    elif roll < 0.19:  # character_repetition_filter: a phrase repeated
        words += [rng.choice(TAILS)] * rng.randint(2, 5)
    elif roll < 0.22:  # word_repetition_filter: the caption again in another case and punctuation
        words = (_caption(rng) + " " + rng.choice(ACTIONS) + " " + rng.choice(PLACES)).title().split()
        words += [w.lower() + rng.choice(("", "", ",", ".")) for w in words]
    elif roll < 0.25:  # flagged_words_filter
        words.insert(rng.randrange(len(words) + 1), rng.choice(FLAGGED))
    elif roll < 0.28:  # perplexity_filter: letters the language model never saw
        words = words[:rng.randint(1, 3)] + [
            "".join(rng.choice(GIBBERISH) + rng.choice("aeo") for _ in range(rng.randint(2, 5)))
            for _ in range(rng.randint(2, 5))]
    elif roll < 0.31:  # special_characters_filter (min): words run together
        words = ["".join(words)]
    elif roll < 0.33:  # other scripts
        words.append(rng.choice(("東京の夜景", "красивый закат", "海边的日落", "Straße im Schnee", "café au lait")))
    return " ".join(words)


def write_captions(path: Path, n: int, seed: int = 0) -> Path:
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as f:
        for i in range(n):
            f.write(json.dumps({"id": i, "text": caption(rng)}, ensure_ascii=False) + "\n")
    return path


def build_resources(work: Path) -> dict:
    """The flagged-words folder and Data-Juicer's model cache (en.sp.model, en.arpa.bin)."""
    import text_resources as R
    from tools.dj_fixtures.word_resources import write_word_lists
    cache = work / "dj_models"
    cache.mkdir(parents=True)
    sp = R.train_sentencepiece(cache / "en.sp.model")
    arpa = R.write_arpa(cache / "en.arpa.bin", sp)  # KenLM reads ARPA text whatever the file's name
    # write_arpa gives <unk> its add-one share (log10 about -3.8): then no text's perplexity can pass
    # the recipe's max_ppl (14435.58) and perplexity_filter would drop nothing; a rarer <unk> can
    lines = arpa.read_text(encoding="utf-8").split("\n")
    lines = [f"{UNK_LOG10:.6f}\t<unk>\t" + line.split("\t")[2] if line.split("\t")[1:2] == ["<unk>"] else line
             for line in lines]
    arpa.write_text("\n".join(lines), encoding="utf-8")
    return {"words": write_word_lists(work / "words"), "cache": cache, "sp": sp, "arpa": arpa}


def recipe_ops() -> list[dict]:
    """The recipe's text ops with its parameters, in its order."""
    import yaml
    ops = [op for op in yaml.safe_load(RECIPE.read_text())["process"] if next(iter(op)) in TEXT_OPS]
    assert [next(iter(op)) for op in ops] == list(TEXT_OPS), "the recipe's text ops changed"
    return [{name: dict(params or {})} for op in ops for name, params in op.items()]


def with_resources(ops: list[dict], res: dict, djx: bool) -> list[dict]:
    """`ops` given the built resources: flagged_words_dir on both sides (Data-Juicer's parameter),
    and for djx the SentencePiece and KenLM paths (Data-Juicer finds them in its cache)."""
    out = []
    for op in ops:
        (name, params), = op.items()
        if name == "flagged_words_filter":
            params = {**params, "flagged_words_dir": str(res["words"])}
        if name == "perplexity_filter" and djx:
            params = {**params, "sp_model_path": str(res["sp"]), "kenlm_model_path": str(res["arpa"])}
        out.append({name: params})
    return out


def run_djx(work: Path, data: Path, ops: list[dict], np_: int) -> tuple[float, int, Path]:
    from tools.bench_dj import OFFLINE, _timed
    out = work / "djx_out" / "o.jsonl"
    recipe = work / "djx.yaml"
    recipe.write_text(json.dumps({"dataset_path": str(data), "export_path": str(out), "np": np_, "process": ops}))
    wall, pss = _timed([sys.executable, "-m", "djx.cli", "process", str(recipe), "--quiet"],
                       {**os.environ, **OFFLINE}, work / "djx.log")
    return wall, pss, out


def run_dj(work: Path, dj_venv: Path, data: Path, ops: list[dict], np_: int, cache: Path) -> tuple[float, int, Path]:
    from tools.bench_dj import OFFLINE, _dj_export, _timed
    dj_process = dj_venv / "bin" / "dj-process"
    if not dj_process.exists():
        sys.exit(f"{dj_process} not found: install Data-Juicer with ../shared/anchors/dj_install.sh")
    out = work / "dj_out"
    recipe = work / "dj.yaml"
    recipe.write_text(json.dumps({
        "project_name": "bench_text", "dataset_path": str(data), "export_path": str(out / "dj.jsonl"), "np": np_,
        "text_keys": "text", "work_dir": str(work / "dj_work"), "skip_op_error": False, "op_fusion": False,
        "use_cache": False, "open_monitor": False, "open_tracer": False, "keep_stats_in_res_ds": True,
        "process": ops}))
    env = {**os.environ, **OFFLINE, "DATA_JUICER_MODELS_CACHE": str(cache)}
    wall, pss = _timed([str(dj_process), "--config", str(recipe)], env, work / "dj.log")
    return wall, pss, _dj_export(out)


def kept(path: Path) -> dict:
    """id -> text of every sample in a JSON Lines export."""
    with open(path, encoding="utf-8") as f:
        return {rec["id"]: rec["text"] for rec in map(json.loads, f)}


def left_after_each_op(work: Path, results: dict) -> list[str]:
    """How many samples each tool had left after each op: djx's summary, Data-Juicer's log."""
    import re
    left = {}
    if "djx" in results:
        summary = json.loads(results["djx"][2].with_suffix(".summary.json").read_text())
        left["djx"] = {op["name"]: op["kept"] for op in summary["ops"]}
    if "Data-Juicer 1.6.1" in results:
        log = (work / "dj.log").read_text(encoding="utf-8", errors="replace")
        done = re.finditer(r"OP \[(\w+)\] Done in \S+s\. Left (\d+)", log)
        left["Data-Juicer 1.6.1"] = {m[1]: int(m[2]) for m in done}
    lines = ["left after each op:" + "".join(f" {name:>18}" for name in left)]
    for op in TEXT_OPS:
        lines.append(f"  {op:<34}" + "".join(f" {counts.get(op, '?'):>18}" for counts in left.values()))
    return lines


def table(n: int, data: Path, results: dict) -> list[str]:
    from tools.bench import mb
    lines = [f"{'tool':<26} {'wall s':>8} {'samples/s':>10} {'peak PSS':>10} {'kept':>8}"]
    for name, (wall, pss, out) in results.items():
        lines.append(f"{name:<26} {wall:>8.1f} {n / wall:>10,.0f} {mb(pss):>10} {len(kept(out)):>8,}")
    if len(results) == 2:
        (dw, dp, dout), (jw, jp, jout) = results["djx"], results["Data-Juicer 1.6.1"]
        ours, theirs = kept(dout), kept(jout)
        same_ids = ours.keys() == theirs.keys()
        texts = sum(ours[i] != theirs[i] for i in ours.keys() & theirs.keys())
        lines += [f"djx/Data-Juicer: wall x{dw / jw:.2f} (speed x{jw / dw:.2f}), peak PSS x{dp / jp:.2f}",
                  f"kept: djx {len(ours):,}, Data-Juicer {len(theirs):,}; same ids: {same_ids}"
                  + ("" if same_ids else f" (only djx {len(ours.keys() - theirs.keys())}, "
                                         f"only Data-Juicer {len(theirs.keys() - ours.keys())})")
                  + f"; kept texts that differ: {texts}"]
    inputs = kept(data)
    for name, (_, _, out) in results.items():
        changed = sum(text != inputs[i] for i, text in kept(out).items())
        lines.append(f"{name}: {changed:,} kept texts changed by the mappers")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000, help="captions (default 100000)")
    ap.add_argument("--np", type=int, default=psutil.cpu_count(logical=True) or 1, help="workers (default: cores)")
    ap.add_argument("--only", choices=["djx", "dj"], help="run one tool only")
    ap.add_argument("--keep", action="store_true", help="keep the work folder (printed)")
    ap.add_argument("--dj-venv", type=Path, default=Path("/work/dj-venv"), help="a venv with Data-Juicer 1.6.1")
    ap.add_argument("--seed", type=int, default=0, help="caption generator seed")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="djx-bench-text-"))
    try:
        res = build_resources(work)
        data = write_captions(work / "captions.jsonl", args.n, args.seed)
        ops = recipe_ops()
        from djx.core.plan.resources import uss_pss_bytes  # as tools/bench.py's TreeMemory
        from tools.bench import mb
        own, load0 = uss_pss_bytes(os.getpid())[1], os.getloadavg()
        results = {}
        if args.only in (None, "djx"):
            results["djx"] = run_djx(work, data, with_resources(ops, res, True), args.np)
        if args.only in (None, "dj"):
            results["Data-Juicer 1.6.1"] = run_dj(work, args.dj_venv.resolve(), data,
                                                  with_resources(ops, res, False), args.np, res["cache"])
        load = os.getloadavg()
        print(f"{args.n:,} captions, np={args.np}, {psutil.cpu_count()} cores, "
              f"load average (1/5/15 min) {load0[0]:.2f}/{load0[1]:.2f}/{load0[2]:.2f} at the start, "
              f"{load[0]:.2f}/{load[1]:.2f}/{load[2]:.2f} at the end; each tree's PSS includes "
              f"this script's own ({mb(own)} before the runs)")
        print("\n".join(table(args.n, data, results) + left_after_each_op(work, results)))
    finally:
        if args.keep:
            print(f"work folder: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
