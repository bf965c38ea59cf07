"""The red team's cases, one module per class of attack; each module has CASES, a list of Case."""
from __future__ import annotations

import importlib
import pkgutil

from .common import Case


def all_cases() -> list[Case]:
    cases = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name != "common":
            cases += importlib.import_module(f"{__name__}.{info.name}").CASES
    return cases
