"""Loading the plug-ins a recipe names (custom_ops, Data-Juicer's custom_operator_paths) and
registering their ops: one-line errors that say where, package folders, entries that register
nothing, the same file imported twice, and op names a recipe can use.

Each test registers op names of its own (the registry lives as long as the test session)."""
from __future__ import annotations

import textwrap

import pytest

from djx import Filter, Pipeline, RecipeError, register_op
from djx.core.errors import UsageError
from djx.core.op.registry import find_op_class, get_op_class, load_custom_ops
from djx.core.recipe.recipe import load_recipe


def _filter_source(op_name: str, cls: str = "F") -> str:
    return textwrap.dedent(f"""\
        from djx import Filter, register_op


        @register_op("{op_name}")
        class {cls}(Filter):
            stats_keys = ("n",)

            def compute_sample(self, sample, batch):
                batch.stats(sample)["n"] = 1

            def keep(self, stats):
                return True
        """)


def _one_line(e: pytest.ExceptionInfo) -> str:
    message = str(e.value)
    assert "\n" not in message and "Traceback" not in message
    return message


# -- finding 4: a plug-in that fails to import: one line, with the plug-in's file and line --------

def test_a_module_plugin_raising_at_import_is_one_line_naming_its_file_and_line(tmp_path, monkeypatch):
    (tmp_path / "djx_t4_raising_mod.py").write_text("import os\n\nraise RuntimeError('config missing')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(RecipeError) as e:
        load_custom_ops(["djx_t4_raising_mod"], str(tmp_path))
    assert _one_line(e) == (f"custom_ops: importing module 'djx_t4_raising_mod' failed: RuntimeError: config "
                            f"missing (at {tmp_path / 'djx_t4_raising_mod.py'}:3)")


def test_a_module_plugin_with_a_syntax_error_is_one_line_naming_its_file_and_line(tmp_path, monkeypatch):
    (tmp_path / "djx_t4_syntax_mod.py").write_text("x = 1\ndef keep(self)\n    return True\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(RecipeError) as e:
        load_custom_ops(["djx_t4_syntax_mod"], str(tmp_path))
    message = _one_line(e)
    assert message.startswith("custom_ops: importing module 'djx_t4_syntax_mod' failed: SyntaxError: ")
    assert message.endswith(f"(at {tmp_path / 'djx_t4_syntax_mod.py'}:2)")


def test_a_plugin_file_raising_at_import_names_the_line_in_the_plugin_not_in_djx(tmp_path):
    (tmp_path / "t4_helper.py").write_text("def setup():\n    return {}['model_dir']\n")
    (tmp_path / "t4_ops.py").write_text("import sys\nsys.path.insert(0, %r)\nimport t4_helper\n\n"
                                        "t4_helper.setup()\n" % str(tmp_path))
    with pytest.raises(RecipeError) as e:
        load_custom_ops(["t4_ops.py"], str(tmp_path))
    assert _one_line(e).endswith(f"failed: KeyError: 'model_dir' (at {tmp_path / 't4_helper.py'}:2)")


def test_a_plugin_module_that_is_not_found_says_to_give_its_file_or_pythonpath(tmp_path):
    with pytest.raises(RecipeError) as e:
        load_custom_ops(["djx_t14_nowhere"], str(tmp_path))
    message = _one_line(e)
    assert "cannot import module 'djx_t14_nowhere'" in message
    assert "djx_t14_nowhere.py" in message and "PYTHONPATH" in message


# -- finding 5: the same file imported as a module and named as a file -----------------------------

def test_a_plugin_imported_by_module_name_and_named_by_file_is_the_same_op(tmp_path, monkeypatch):
    (tmp_path / "djx_t5_same.py").write_text(_filter_source("t5_same_filter", "Same"))
    monkeypatch.syspath_prepend(str(tmp_path))
    import djx_t5_same  # a script building ops in Python imports its plug-in module ...
    load_custom_ops(["djx_t5_same.py"], str(tmp_path))  # ... and its recipe names the same file
    assert get_op_class("t5_same_filter").__qualname__ == "Same"
    assert djx_t5_same.Same.name == "t5_same_filter"


def test_two_files_registering_one_name_still_clash_naming_both_files(tmp_path):
    (tmp_path / "t5_a.py").write_text(_filter_source("t5_clash_filter"))
    (tmp_path / "t5_b.py").write_text(_filter_source("t5_clash_filter"))  # the same class name, another file
    load_custom_ops(["t5_a.py"], str(tmp_path))
    with pytest.raises(RecipeError, match=r"'t5_clash_filter' is already registered by the op .*\.F "
                                          rf"\(from {tmp_path / 't5_a.py'}\).*must choose another name"):
        load_custom_ops(["t5_b.py"], str(tmp_path))


# -- finding 9: op names ------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["", "My Filter!", "word-count", "1st_filter", "Upper_filter"])
def test_an_op_name_a_recipe_cannot_use_is_refused(name):
    class Named(Filter):
        stats_keys = ("n",)

    with pytest.raises(UsageError, match="lowercase letters, digits and underscores"):
        register_op(name)(Named)
    with pytest.raises(UsageError, match="lowercase letters, digits and underscores"):
        register_op("t9_fine_filter", aliases=(name,))(Named)
    assert find_op_class(name) is None


def test_a_refused_name_leaves_later_registrations_working():
    class Empty(Filter):
        stats_keys = ("n",)

    class Later(Filter):
        stats_keys = ("n",)

    with pytest.raises(UsageError):
        register_op("")(Empty)
    register_op("t9_totally_new_filter")(Later)
    assert get_op_class("t9_totally_new_filter") is Later


def test_a_bad_name_in_a_plugin_file_is_one_line_with_its_line(tmp_path):
    (tmp_path / "t9_ops.py").write_text(_filter_source("My Filter!"))
    with pytest.raises(RecipeError) as e:
        load_custom_ops(["t9_ops.py"], str(tmp_path))
    message = _one_line(e)
    assert "op name 'My Filter!' is not one a recipe can use" in message
    assert message.endswith(f"(at {tmp_path / 't9_ops.py'}:4)")


# -- finding 8: folders, and entries that register nothing ----------------------------------------

def _package(folder, op_name: str) -> None:
    folder.mkdir(parents=True)
    (folder / "word_ops.py").write_text(_filter_source(op_name, "WordOp"))
    (folder / "__init__.py").write_text("from .word_ops import WordOp  # noqa: F401\n")


def test_a_package_folder_in_custom_operator_paths_is_loaded_as_data_juicer_does(tmp_path):
    _package(tmp_path / "plugins" / "t8_pkg", "t8_pkg_filter")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "r.yaml").write_text("dataset_path: d.jsonl\nexport_path: out/x.jsonl\n"
                                             "custom_operator_paths: [../plugins/t8_pkg]\n"
                                             "process:\n  - t8_pkg_filter: {}\n")
    pipe = Pipeline.from_recipe(str(tmp_path / "sub" / "r.yaml"))
    assert [op.name for op in pipe.ops] == ["t8_pkg_filter"]
    assert type(pipe.ops[0]).__qualname__ == "WordOp"
    assert pipe.recipe.notes() == []


def test_a_bare_folder_name_beside_the_recipe_is_that_folder(tmp_path):
    _package(tmp_path / "t8_bare_pkg", "t8_bare_filter")
    load_custom_ops(["t8_bare_pkg"], str(tmp_path))
    assert get_op_class("t8_bare_filter").__qualname__ == "WordOp"


@pytest.mark.parametrize("entry", ["loose/", "./loose", "loose"])
def test_a_folder_without_init_is_refused_saying_what_to_name(tmp_path, entry):
    (tmp_path / "loose").mkdir()
    (tmp_path / "loose" / "my_word_ops.py").write_text(_filter_source("t8_loose_filter"))
    with pytest.raises(RecipeError) as e:
        load_custom_ops([entry], str(tmp_path))
    message = _one_line(e)
    assert f"custom_ops: {tmp_path / 'loose'} is a folder without __init__.py" in message
    assert str(tmp_path / "loose" / "my_word_ops.py") in message
    assert find_op_class("t8_loose_filter") is None


def test_an_entry_that_registers_no_op_is_a_note_with_the_plan(tmp_path):
    (tmp_path / "t8_noreg.py").write_text("from djx import Filter\n\n\nclass NoReg(Filter):\n    pass\n")
    (tmp_path / "t8_reg.py").write_text(_filter_source("t8_reg_filter"))
    (tmp_path / "r.yaml").write_text("dataset_path: d.jsonl\nexport_path: out/x.jsonl\n"
                                     "custom_ops: [t8_noreg.py, t8_reg.py]\n"
                                     "process:\n  - t8_reg_filter: {}\n")
    pipe = Pipeline.from_recipe(str(tmp_path / "r.yaml"))
    (note,) = pipe.recipe.notes()
    assert note.startswith("custom_ops: t8_noreg.py registers no op")
    assert "@register_op" in note


def test_an_unknown_op_error_names_the_entry_that_registered_nothing(tmp_path):
    (tmp_path / "t8_empty.py").write_text("X = 1\n")
    (tmp_path / "r.yaml").write_text("dataset_path: d.jsonl\nexport_path: out/x.jsonl\n"
                                     "custom_ops: [t8_empty.py]\nprocess:\n  - t8_missing_filter: {}\n")
    with pytest.raises(RecipeError, match=r"unknown op 't8_missing_filter'.*custom_ops: t8_empty.py registers no op"):
        Pipeline.from_recipe(str(tmp_path / "r.yaml"))


def test_a_recipe_read_without_its_ops_imports_no_plugin_for_its_notes(tmp_path):
    marker = tmp_path / "imported"
    (tmp_path / "t8_evil.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    (tmp_path / "r.yaml").write_text("dataset_path: d.jsonl\nexport_path: out/x.jsonl\n"
                                     "custom_ops: [t8_evil.py]\nprocess:\n  - text_length_filter: {}\n")
    recipe = load_recipe(str(tmp_path / "r.yaml"))
    assert recipe.notes() == [] and not marker.exists()
