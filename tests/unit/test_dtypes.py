"""`dtype: auto` picks bfloat16 only where the device runs it natively (GPUs of compute capability
8.0+, CPUs with AVX-512 BF16 or AMX): elsewhere it is emulated and several times slower."""
from djx.core.models.dtypes import half_is_native, resolve_dtype


def test_auto_picks_bfloat16_only_where_it_is_native():
    assert resolve_dtype("auto", "cpu", flags=frozenset({"avx2", "fma"})) == "float32"
    assert resolve_dtype("auto", "cpu", flags=frozenset({"avx512f", "avx512_bf16"})) == "bfloat16"
    assert resolve_dtype("auto", "cpu", flags=frozenset({"amx_tile", "amx_bf16"})) == "bfloat16"
    assert resolve_dtype("auto", "cuda:0", capability=7.5) == "float32"   # T4
    assert resolve_dtype("auto", "cuda:0", capability=9.0) == "bfloat16"  # H100
    assert resolve_dtype("float16", "cpu", flags=frozenset({"avx2"})) == "float16"  # as asked


def test_float16_on_a_cpu_needs_amx_fp16_and_an_unknown_device_is_unknown():
    assert half_is_native("float16", "cpu", flags=frozenset({"avx512_bf16"})) is False
    assert half_is_native("float16", "cpu", flags=frozenset({"amx_fp16"})) is True
    assert half_is_native("float16", "cuda:0", capability=6.1) is True
    assert half_is_native("bfloat16", "cuda:0") is None  # no capability known: not claimed either way
    assert resolve_dtype("auto", "cuda:0") == "float32"  # unknown: the safe choice
