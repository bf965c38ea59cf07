"""Write the outputs of a finished run directly (export, dropped, rejected, summary), fast, for
`djx analyze` tests and benchmarks: realistic, skewed stats decided by the real ops' keep().

    python tools/make_analysis_outputs.py out/big.jsonl --samples 1000000

The run it stands for: text_length_filter (min_len 30), image_aspect_ratio_filter (0.5..2.0, one
to three images per sample), image_text_similarity_filter (min_score 0.2, one score per chunk).
Image paths point at the demo images, so the report's thumbnails load.
"""
from __future__ import annotations

import argparse
import json
import os

import numpy as np

from djx.core.recipe.context import DROP_KEY, POSITION_KEY, STATS_KEY

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ASSETS = os.path.join(REPO, "tests", "assets")  # in a checkout; an installed djx has no tests/: pass assets=


def _demo_dataset(assets: str) -> str:
    return os.path.join(assets, "demo", "demo.jsonl")


def _tiny_clip(assets: str) -> str:
    return os.path.join(assets, "models", "tiny-clip")
REJECTED_SHARE = 0.005


def run_ops(assets: str = ASSETS) -> list:
    """The ops of the run these outputs stand for (nothing is loaded: keep() needs no model)."""
    from djx.ops.filter.image_aspect_ratio_filter import ImageAspectRatioFilter
    from djx.ops.filter.image_text_similarity_filter import ImageTextSimilarityFilter
    from djx.ops.filter.text_length_filter import TextLengthFilter
    return [TextLengthFilter(min_len=30), ImageAspectRatioFilter(min_ratio=0.5, max_ratio=2.0),
            ImageTextSimilarityFilter(hf_clip=_tiny_clip(str(assets)), min_score=0.2)]


def recipe_text(export: str, assets: str = ASSETS) -> str:
    """A recipe of that run (YAML), for `djx analyze --recipe`."""
    return (f"dataset_path: {_demo_dataset(str(assets))}\nexport_path: {export}\nprocess:\n"
            f"  - text_length_filter: {{min_len: 30}}\n"
            f"  - image_aspect_ratio_filter: {{min_ratio: 0.5, max_ratio: 2.0}}\n"
            f"  - image_text_similarity_filter: {{hf_clip: {_tiny_clip(str(assets))}, min_score: 0.2}}\n")


def _stats(rng, n: int):
    """Per sample: text length (lognormal, skewed), 1-3 aspect ratios, 1-2 chunk scores."""
    text_len = np.maximum(1, rng.lognormal(4.0, 0.6, n)).astype(int)
    n_images = rng.integers(1, 4, n)
    ratios = np.round(rng.lognormal(0.0, 0.45, n_images.sum()), 4)
    n_chunks = np.minimum(n_images, rng.integers(1, 3, n))
    scores = np.round(rng.normal(0.25, 0.06, n_chunks.sum()), 5)
    return text_len, n_images, ratios, n_chunks, scores


def write_outputs(export: str, samples: int, seed: int = 0, block: int = 100_000, assets: str = ASSETS,
                  reject_at: int | None = None) -> dict:
    """Write the four outputs of a run over `samples` inputs next to `export`; return the summary.
    The bad samples are rejected as they are read, or by op `reject_at` (those that reach it)."""
    from djx.core.io.outputs import OutputPaths
    paths = OutputPaths.for_export(export)
    os.makedirs(os.path.dirname(paths.export), exist_ok=True)
    ops = run_ops(assets)
    rng = np.random.default_rng(seed)
    images = sorted(os.listdir(os.path.join(os.path.dirname(_demo_dataset(str(assets))), "images")))
    tally = [{"name": op.name, "in": 0, "kept": 0, "dropped": 0, "rejected": 0, "seconds": 0.0} for op in ops]
    counts = {"kept": 0, "dropped": 0, "rejected": 0}
    with open(paths.export, "w") as kept, open(paths.dropped, "w") as dropped, open(paths.rejected, "w") as rej:
        for start in range(0, samples, block):
            n = min(block, samples - start)
            text_len, n_images, ratios, n_chunks, scores = _stats(rng, n)
            r_at, s_at = np.concatenate([[0], np.cumsum(n_images)]), np.concatenate([[0], np.cumsum(n_chunks)])
            bad = rng.random(n) < REJECTED_SHARE
            for i in range(n):
                pos = start + i
                refs = [f"images/{images[(pos + k) % len(images)]}" for k in range(n_images[i])]
                rec = {"id": f"s{pos}", "text": "x" * int(text_len[i]), "images": refs}
                if bad[i] and reject_at is None:
                    rej.write(json.dumps({POSITION_KEY: pos, "line": pos + 1, "op": None, "code": "bad_image",
                                          "reason": f"cannot read {refs[0]}", "record": rec}) + "\n")
                    counts["rejected"] += 1
                    continue
                values = [{"text_len": int(text_len[i])},
                          {"aspect_ratios": ratios[r_at[i]:r_at[i + 1]].tolist()},
                          {"image_text_similarity": scores[s_at[i]:s_at[i + 1]].tolist()}]
                stats, where = {}, None
                for k, (op, new) in enumerate(zip(ops, values)):
                    tally[k]["in"] += 1
                    if bad[i] and k == reject_at:
                        where = "rejected"
                        tally[k]["rejected"] += 1
                        rej.write(json.dumps({POSITION_KEY: pos, "line": pos + 1, "op": op.name, "code": "bad_image",
                                              "reason": f"cannot decode {refs[0]}", "record": rec}) + "\n")
                        counts["rejected"] += 1
                        break
                    stats.update(new)
                    if not op.keep(stats):
                        where = k
                        tally[k]["dropped"] += 1
                        break
                    tally[k]["kept"] += 1
                rec[STATS_KEY], rec[POSITION_KEY] = stats, pos
                if where == "rejected":
                    continue
                if where is None:
                    kept.write(json.dumps(rec) + "\n")
                    counts["kept"] += 1
                else:
                    rec[DROP_KEY] = {"op": ops[where].name, "op_index": where,
                                     "reason": f"{list(values[where])[0]} outside the kept range"}
                    dropped.write(json.dumps(rec) + "\n")
                    counts["dropped"] += 1
    summary = {"project_name": "generated", "dataset_path": _demo_dataset(str(assets)), "input": samples, **counts,
               "rejected_by_code": {"bad_image": counts["rejected"]} if counts["rejected"] else {},
               "ops": tally, "outputs": {"export": paths.export, "dropped": paths.dropped,
                                         "rejected": paths.rejected, "summary": paths.summary}}
    with open(paths.summary, "w") as f:
        json.dump(summary, f)
    return summary


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("export")
    ap.add_argument("--samples", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    s = write_outputs(args.export, args.samples, args.seed)
    recipe = os.path.splitext(args.export)[0] + ".recipe.yaml"
    with open(recipe, "w") as f:
        f.write(recipe_text(os.path.abspath(args.export)))
    print(f"{s['input']} samples: {s['kept']} kept, {s['dropped']} dropped, {s['rejected']} rejected; recipe {recipe}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
