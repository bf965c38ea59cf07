"""The build_binary advice for an ARPA KenLM model names an output beside it, never the ARPA file
itself (Data-Juicer's cache names its ARPA file en.arpa.bin: `build_binary X X` would overwrite it)."""
from __future__ import annotations

import pytest

from djx.ops.common.text_models import _binary_name


@pytest.mark.parametrize("arpa, out", [("/c/en.arpa.bin", "/c/en.arpa.binary"), ("/c/en.arpa", "/c/en.bin"),
                                       ("/c/model", "/c/model.bin")])
def test_the_advised_binary_is_another_file_beside_the_arpa_one(arpa, out):
    assert _binary_name(arpa) == out != arpa
