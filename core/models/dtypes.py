"""Which model dtypes a device runs natively. bfloat16 is fast on GPUs of compute capability 8.0+
and on CPUs with AVX-512 BF16 or AMX; elsewhere it is emulated (CLIP ViT-B/32 on an AVX2 EPYC:
1.6 images/s against 12.6 in float32). `dtype: auto` picks bfloat16 only where it is native."""
from __future__ import annotations

import functools
import subprocess

CPU_BF16_FLAGS = ("avx512_bf16", "amx_bf16")
HALF = ("bfloat16", "float16")


@functools.lru_cache(maxsize=None)
def cpu_flags() -> frozenset[str]:
    """This CPU's feature flags (Linux /proc/cpuinfo; empty where it cannot be read)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("flags"):
                    return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


def cuda_compute_capabilities() -> list[float]:
    """Compute capability of each visible GPU, from nvidia-smi (no CUDA context here); [] if unknown."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20, check=True).stdout
        return [float(x) for x in out.split()]
    except (OSError, subprocess.SubprocessError, ValueError):
        return []


def half_is_native(dtype: str, device: str, flags: frozenset[str] | None = None,
                   capability: float | None = None) -> bool | None:
    """Whether `dtype` (bfloat16 or float16) runs natively on `device`; None when unknown."""
    if device.startswith("cuda"):
        if capability is None:
            return None
        return capability >= 8.0 if dtype == "bfloat16" else capability >= 6.0
    flags = cpu_flags() if flags is None else flags
    if not flags:
        return None
    # CPUs have no fast float16 matmul short of AMX-FP16; bfloat16 needs AVX-512 BF16 or AMX
    return any(f in flags for f in (CPU_BF16_FLAGS if dtype == "bfloat16" else ("amx_fp16",)))


def resolve_dtype(dtype: str, device: str, flags: frozenset[str] | None = None,
                  capability: float | None = None) -> str:
    """`auto` -> bfloat16 where it is native on `device`, else float32; other dtypes as given."""
    if dtype != "auto":
        return dtype
    return "bfloat16" if half_is_native("bfloat16", device, flags, capability) else "float32"


def slow_dtype_warnings(specs, devices: tuple[str, ...]) -> list[str]:
    """A `warning:` line for each (model, device kind) whose half dtype would be emulated."""
    caps = cuda_compute_capabilities() if any(d.startswith("cuda") for d in devices) else []
    out = []
    for spec in dict.fromkeys(specs):
        if spec.dtype not in HALF:
            continue
        for dev in dict.fromkeys(devices):
            index = int(dev.split(":")[1]) if dev.startswith("cuda:") else 0
            cap = caps[index] if dev.startswith("cuda") and index < len(caps) else None
            if half_is_native(spec.dtype, dev, capability=cap) is False:
                where = (f"{dev} (compute capability {cap})" if dev.startswith("cuda") else
                         "this CPU (no AVX-512 BF16 or AMX)" if spec.dtype == "bfloat16" else "this CPU")
                out.append(f"warning: dtype {spec.dtype} for {spec.label()} is emulated on {where}: expect it "
                           f"several times slower than float32; use dtype: float32, or dtype: auto "
                           f"(bfloat16 only where it is native)")
    return out
