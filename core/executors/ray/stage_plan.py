"""How the Ray executor cuts the op chain into stages (one actor pool each), and what one actor of a
stage needs.

The whole chain is one stage, as a local worker runs it: one actor imports torch and loads the
chain's models once, and Ray starts one actor process per worker instead of one per stage (the
demo on a 2-core machine: start-up 11.0-12.4 s with three stages, whose actors started beside Ray
Data's own and imported torch twice; 8.9-10.2 s as one). The chain is cut by models instead (`stage_groups`: consecutive ops sharing a model, a run of model-free ops) where
- under `scoring: device` some model ops score apart and others do not: the stages of the first
  prepare only (no weights) and the others score in their own actors, or
- the whole chain's actor would not fit the largest node's memory while its parts would.
"""
from __future__ import annotations

from djx.core.errors import DjxError
from djx.core.models.share.score_client import takes_part

MiB = 1 << 20
DECODE_BYTES_PER_SAMPLE = 4 * MiB   # decoded images of one sample, for the declared actor memory
ACTOR_BASE_BYTES = 256 * MiB        # interpreter and libraries of one actor

Groups = list[tuple[int, int, frozenset]]


def stage_groups(ops: list) -> Groups:
    """[(first, last, model specs)]: consecutive ops sharing a model, or a run of model-free ops."""
    groups: Groups = []
    for k, op in enumerate(ops):
        specs = frozenset(op.model_specs())
        if groups:
            first, _, have = groups[-1]
            if (not specs and not have) or (specs & have):
                groups[-1] = (first, k + 1, have | specs)
                continue
        groups.append((k, k + 1, specs))
    return groups


def whole_chain(ops: list) -> Groups:
    """The chain as one stage (none for an empty chain)."""
    return [(0, len(ops), frozenset(spec for op in ops for spec in op.model_specs()))] if ops else []


def ray_stages(ops: list, scoring_device: bool) -> Groups:
    """The stages a run starts from (before the node's memory is known: `fitted`): the whole chain,
    unless under `scoring: device` its model ops are of both kinds (some score apart, some not)."""
    parts = {takes_part(op) for op in ops if op.model_specs()}
    return stage_groups(ops) if scoring_device and len(parts) > 1 else whole_chain(ops)


def actor_bytes(specs: frozenset, model_bytes: dict, batch_size: int, weights: bool = True) -> int:
    """The memory one actor of a stage declares: its models' weights (none where it only prepares),
    the interpreter and libraries, and a batch's decoded images."""
    held = sum(model_bytes.get(spec.label(), 0) for spec in specs) if weights else 0
    return held + ACTOR_BASE_BYTES + batch_size * DECODE_BYTES_PER_SAMPLE


def actor_need(ops: list, specs: frozenset, model_bytes: dict, batch_size: int, node_memory: float,
               weights: bool = True) -> int:
    """actor_bytes of the stage of `ops`; a DjxError where that is more than the largest node has."""
    need = actor_bytes(specs, model_bytes, batch_size, weights)
    if need > node_memory:
        raise DjxError(f"a ray actor for {', '.join(op.name for op in ops)} needs about {need / 2**30:.2f} GiB of "
                       f"memory but the largest node offers {node_memory / 2**30:.2f} GiB; lower batch_size or "
                       f"add memory")
    return need


def largest_node_memory(ray) -> float:
    """The memory Ray offers on the cluster's largest alive node (0 where it says none)."""
    return max((n.get("Resources", {}).get("memory", 0) for n in ray.nodes() if n.get("Alive")), default=0)


def fitted(ops: list, groups: Groups, model_bytes: dict, batch_size: int, node_memory: float,
           scored: bool = False) -> Groups:
    """`groups`, or where they are the whole chain and its actor (holding weights unless `scored`)
    needs more than `node_memory`, the chain cut by models (whose actors may fit)."""
    if len(groups) != 1 or len(ops) < 2:
        return groups
    need = actor_bytes(groups[0][2], model_bytes, batch_size, weights=not scored)
    return stage_groups(ops) if need > node_memory else groups


def cpu_tokens(cpus: float, n_actors: int) -> tuple[float, float]:
    """CPUs declared by a read or parse task, and by a stage actor, on a cluster of `cpus`. CPU is a
    scheduling token here (real use is bounded by torch threads). The read task and a parse task take
    a quarter of the cluster each (1 CPU at most); actors share 90% of the rest. Whole CPUs per actor
    would leave a 2-CPU cluster no room to read, and fractions summing to a hair over the rest (Ray
    rounds to 1e-4) would make the run wait forever."""
    io_cpus = min(1.0, cpus / 4)
    return io_cpus, max(0.001, min(1.0, int((cpus - 2 * io_cpus) * 9000 / max(1, n_actors)) / 10000))
