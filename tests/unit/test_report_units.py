"""How the report prints values: sizes in Data-Juicer's units, digits enough to tell a value from its bound."""
from __future__ import annotations

from djx.analyze.units import fmt


def test_sizes_print_in_the_units_a_recipe_writes():
    from djx.ops.filter.image_size_filter import parse_size
    for text in ("5 MB", "512 KB", "1.5 GB", "300 B"):
        assert fmt(parse_size(text.replace(" ", ""), "min_size"), is_bytes=True) == text


def test_values_either_side_of_a_bound_read_differently():
    bound = 0.3
    for below, above in ((0.2999, 0.3001), (0.2999999, 0.3000001), (0.3 - 1e-12, 0.3 + 1e-12)):
        lo, hi, b = fmt(below, near=[bound]), fmt(above, near=[bound]), fmt(bound, near=[below, above])
        assert len({lo, hi, b}) == 3 and float(lo) < float(b) <= 0.3 <= float(hi), (lo, b, hi)
    assert fmt(5 * 1024 ** 2 - 1, is_bytes=True, near=[5 * 1024 ** 2]) != fmt(5 * 1024 ** 2, is_bytes=True)
    assert fmt(30) == "30" and fmt(0.25) == "0.25"
