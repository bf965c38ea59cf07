"""The plan's warning that torch and transformers would be compiled from source in every worker."""
from __future__ import annotations

import importlib.util
import os
import sys

from djx.core.plan.bytecode import bytecode_warnings, uncompiled


def test_libraries_without_bytecode_that_python_may_not_write_are_named(tmp_path, monkeypatch):
    # a bytecode folder of its own, empty: as an install without bytecode looks to Python
    monkeypatch.setattr(sys, "pycache_prefix", str(tmp_path / "pyc"))
    assert uncompiled(dont_write=True) == ["torch", "transformers"]
    assert uncompiled(dont_write=False) == []  # the first import writes it, the next ones read it
    torch_cache = importlib.util.cache_from_source(importlib.util.find_spec("torch").origin)
    os.makedirs(os.path.dirname(torch_cache))
    open(torch_cache, "wb").close()
    assert uncompiled(dont_write=True) == ["transformers"]


def test_the_warning_says_what_to_run_and_only_when_models_are_loaded(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "pycache_prefix", str(tmp_path / "pyc"))
    [line] = bytecode_warnings(["a model"], dont_write=True)
    assert line.startswith("warning: torch, transformers have no compiled bytecode")
    assert "PYTHONDONTWRITEBYTECODE is set" in line
    # bytecode is read from the prefix only: every folder on sys.path is compiled into it
    home = os.path.dirname(os.path.dirname(importlib.util.find_spec("torch").origin))
    assert f"`PYTHONPYCACHEPREFIX={tmp_path / 'pyc'} python -m compileall -q -j 0 " in line and home in line
    assert os.path.dirname(os.__file__) in line  # the standard library's folder too
    assert bytecode_warnings([], dont_write=True) == []  # no model op: torch is not imported
    monkeypatch.setattr(sys, "pycache_prefix", None)  # this environment's own bytecode, beside the sources
    assert bytecode_warnings(["a model"], dont_write=True) == []


def test_without_a_prefix_the_warning_says_to_compile_the_librarys_own_folder(tmp_path, monkeypatch):
    site = tmp_path / "site"
    (site / "heavylib").mkdir(parents=True)
    (site / "heavylib" / "__init__.py").write_text("X = 1\n")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setattr(sys, "pycache_prefix", None)
    [line] = bytecode_warnings(["a model"], names=("heavylib",), dont_write=True)
    assert line.startswith("warning: heavylib has no compiled bytecode")
    assert f"Compile them once: `python -m compileall -q -j 0 {site}`" in line
    assert bytecode_warnings(["a model"], names=("heavylib",), dont_write=False) == []  # its folder is writable
