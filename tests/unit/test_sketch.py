"""The stats table of `djx analyze` streams values through a sketch: exact below EXACT_LIMIT values,
and within 1% of the range above it, against numpy on the same values."""
import numpy as np
import pytest

from djx.analyze.sketch import EXACT_LIMIT, ValueSketch


@pytest.mark.parametrize("kind", ["normal", "lognormal", "ints", "few"])
def test_sketch_matches_numpy(kind):
    rng = np.random.default_rng(1)
    data = {"normal": rng.normal(3, 2, 60_000), "lognormal": rng.lognormal(0, 2.5, 60_000),
            "ints": rng.integers(0, 50, 60_000).astype(float), "few": rng.normal(0, 1, 300)}[kind]
    s = ValueSketch()
    for chunk in np.array_split(data, 13):   # a mix of single values and lists, as records give them
        s.extend(chunk[:-1].tolist())
        s.add(float(chunk[-1]))
    s.flush()
    assert s.n == data.size and s.min == data.min() and s.max == data.max()
    assert s.mean == pytest.approx(data.mean(), rel=1e-12)
    assert s.std == pytest.approx(data.std(ddof=1), rel=1e-9)
    qs = [0.25, 0.5, 0.75]
    err = np.abs(np.array(s.percentiles(qs)) - np.percentile(data, [25, 50, 75])) / np.ptp(data)
    assert err.max() < 0.01
    assert s.is_exact == (data.size <= EXACT_LIMIT)
    if s.is_exact:
        assert err.max() == 0
