"""Which filter computes which stat, and the thresholds a recipe sets on it.

Found generically from the op objects: a filter's `stats_keys`, and its numeric attributes named
`min_<x>` / `max_<x>` (e.g. min_score, max_len, min_width; image_size_filter's parsed min_bytes).
A bound goes to the filter's only stat, or to the stat whose name contains `<x>` (min_width ->
image_width). Bounds that mean "no bound" (sys.maxsize) and bounds no stat matches draw no line.
"""
from __future__ import annotations

from dataclasses import dataclass, field

_NO_BOUND = 1e15


@dataclass(frozen=True)
class Threshold:
    op_index: int
    op: str
    stat: str
    param: str        # the attribute it came from, e.g. min_score
    side: str         # "min": values below are dropped; "max": values above
    value: float
    is_bytes: bool = False  # a size in bytes (a `*_bytes` attribute): printed as "5 MB"

    @property
    def label(self) -> str:
        return f"{self.op}.{self.param} = {self.shown()}"

    def shown(self, near=()) -> str:
        """The bound's value as the report prints it (digits enough to differ from each of `near`)."""
        from djx.analyze.units import fmt
        return fmt(self.value, self.is_bytes, near)


@dataclass(frozen=True)
class FilterInfo:
    op_index: int
    name: str
    stats: tuple[str, ...]
    any_or_all: str = "any"
    thresholds: tuple[Threshold, ...] = field(default=())


def filters_from_ops(ops) -> list[FilterInfo]:
    """FilterInfo for every filter among `ops` (op objects, in recipe order)."""
    out = []
    for i, op in enumerate(ops):
        stats = tuple(getattr(op, "stats_keys", ()) or ())
        if not stats:
            continue
        mode = getattr(op, "any_or_all", "any")
        # a reversed range keeps what lies outside its bounds: no bound line means what it says there
        bounds = () if getattr(op, "reversed_range", False) is True else tuple(_thresholds(i, op, stats))
        out.append(FilterInfo(i, op.name, stats, mode if mode in ("any", "all") else "any", bounds))
    return out


def filters_from_names(names: list[str]) -> list[FilterInfo]:
    """Without a recipe: the stats of each named op (from its class), no thresholds."""
    from djx.core.op.registry import get_op_class
    out = []
    for i, name in enumerate(names):
        try:
            cls = get_op_class(name)
        except Exception:  # a plug-in that is not loaded here: its stats stay unattributed
            continue
        stats = tuple(getattr(cls, "stats_keys", ()) or ())
        if stats:
            out.append(FilterInfo(i, name, stats))
    return out


def _thresholds(index: int, op, stats: tuple[str, ...]):
    for attr, value in sorted(vars(op).items()):
        side = attr[:3]
        if side not in ("min", "max") or not attr.startswith(side + "_"):
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or abs(value) >= _NO_BOUND:
            continue
        suffix = attr[4:]
        matches = [s for s in stats if suffix and suffix in s]
        stat = stats[0] if len(stats) == 1 else (matches[0] if len(matches) == 1 else None)
        if stat is not None:
            is_bytes = suffix == "bytes"
            yield Threshold(index, op.name, stat, _param_name(op, attr, side) if is_bytes else attr, side,
                            float(value), is_bytes)


def _param_name(op, attr: str, side: str) -> str:
    """The recipe's name of a parsed size bound: image_size_filter's min_bytes comes from min_size."""
    import inspect
    try:
        params = inspect.signature(type(op).__init__).parameters
    except (TypeError, ValueError):
        return attr
    return f"{side}_size" if f"{side}_size" in params else attr


def reduce_for(side: str, any_or_all: str) -> str:
    """How a sample's list of values decides against one bound: under `any`, a min bound is met
    when the largest value meets it; under `all`, when the smallest does (and the reverse for max)."""
    if side == "min":
        return "max" if any_or_all == "any" else "min"
    return "min" if any_or_all == "any" else "max"
