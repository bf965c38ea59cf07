"""`djx process --dry-run` for a deduplicator with a threshold to choose (ops that offer
`threshold_sweep`: image_semantic_deduplicator): how many samples each threshold would remove,
from the embeddings the input already carries (an export of an earlier run re-filtered), counted
only where a run would reuse them (valid, and vouched for by djx); else how to get the table."""
from __future__ import annotations

from djx.core.errors import DjxError


def threshold_views(pipe, recipe, limit: int | None = None) -> list[str]:
    """The dry run's lines for each op of the recipe that offers `threshold_sweep`, over the
    input's first `limit` samples (all without)."""
    swept = [(k, op) for k, op in enumerate(pipe.ops) if hasattr(op, "threshold_sweep")]
    if not swept:
        return []
    from djx.core.io.dataset import dataset_files
    from djx.core.io.export_input import stats_beside
    from djx.core.run.chain import OpChain
    from djx.core.run.stat_reuse import input_samples, vouched_stats
    try:
        files = dataset_files(recipe.dataset_path)
    except DjxError:
        return []  # the dataset's own lines say why
    chain = OpChain(pipe.ops, recipe.input_context(files))
    side_stats, _ = stats_beside(recipe.dataset_path, files)
    lines = []
    for k, op in swept:
        name, seen, read = op.name or type(op).__name__, [0], [0]

        def counted(k=k):
            samples = input_samples(chain, files, side_stats)
            limited = ((pos, s) for pos, s in samples if limit is None or pos < limit)
            for pos, stats in vouched_stats(chain, k, _counting(limited, read)):
                seen[0] += 1
                yield pos, stats
        try:
            removed = op.threshold_sweep(counted())
        except DjxError as e:
            lines.append(f"{name} (process[{k}]): no threshold table: {e}")
            continue
        if not seen[0]:
            lines.append(
                f"{name} (process[{k}]): none of the {read[0]} input samples carries embeddings djx "
                f"vouches for, so no threshold table yet: `djx process RECIPE --limit 1000 --report` "
                f"embeds the first 1,000 samples and prints it, as `djx analyze EXPORT` does after a run")
            continue
        lines.append(f"{name} (process[{k}]): samples each threshold would remove, of the {seen[0]} of "
                     f"{read[0]} input samples that carry its embeddings (samples an earlier op drops "
                     f"are counted too)")
        for t, n in sorted(removed.items()):
            mark = "  <- this recipe" if abs(t - op.threshold) < 1e-9 else ""
            lines.append(f"  threshold {t:.2f}: {n:>8} ({n / seen[0]:.1%}){mark}")
    return lines


def _counting(samples, read: list):
    for sample in samples:
        read[0] += 1
        yield sample
