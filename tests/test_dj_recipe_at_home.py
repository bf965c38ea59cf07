"""A Data-Juicer user's recipe runs as it is: what Data-Juicer keeps in its caches
(DATA_JUICER_CACHE_HOME: assets/flagged_words.json, models/en.sp.model, models/en.arpa.bin) is found
there, and what is nowhere is listed in one error at load, each line with the key to set and the
place Data-Juicer would have used."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import text_resources as R

ASSETS = Path(__file__).parent / "assets"
RECIPE = ASSETS / "dj_recipes" / "llava-pretrain-refine.yaml"
MODELS = ASSETS / "models"


@pytest.fixture
def dj_cache_home(tmp_path, monkeypatch) -> Path:
    """An empty Data-Juicer cache home (assets/, models/), the only one this test's djx can see."""
    home = tmp_path / "dj-cache"
    (home / "assets").mkdir(parents=True)
    (home / "models").mkdir()
    monkeypatch.setenv("DATA_JUICER_CACHE_HOME", str(home))
    for var in ("DATA_JUICER_ASSETS_CACHE", "DATA_JUICER_MODELS_CACHE", "DATA_JUICER_EXTERNAL_MODELS_HOME"):
        monkeypatch.delenv(var, raising=False)
    return home


def _fill(home: Path) -> None:
    """What Data-Juicer would have downloaded, under its own file names (tiny stand-ins)."""
    (home / "assets" / "flagged_words.json").write_text(json.dumps({"en": ["badword"]}))
    sp = R.train_sentencepiece(home / "models" / "en.sp.model")
    R.write_arpa(home / "models" / "en.arpa.bin", sp)  # KenLM reads ARPA text under any name


def _dj_format_data(folder: Path) -> Path:
    """LLaVA pretrain data as the recipe expects it: converted to Data-Juicer's format, caption only."""
    lines = []
    for i, photo in enumerate(sorted((ASSETS / "faces").glob("*.jpg"))):
        shutil.copy(photo, folder / photo.name)
        lines.append({"id": i, "images": [photo.name],
                      "text": f"<image>a photo of people and places number {i} <|__dj__eoc|>"})
    path = folder / "blip_laion_cc_sbu_558k_dj_fmt_only_caption.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in lines))
    return path


def test_every_missing_resource_of_a_recipe_is_named_in_one_error_with_where_data_juicer_keeps_it(
        tmp_path, dj_cache_home, djx_cli):
    res = djx_cli("process", "--config", RECIPE, "--set", f"dataset_path={_dj_format_data(tmp_path)}",
                  "--set", f"export_path={tmp_path / 'out.jsonl'}")
    assert res.rc == 1
    err = res.err
    assert "3 problems" in err, err
    assert "process[4].flagged_words_filter: flagged_words_dir: not set" in err
    assert str(dj_cache_home / "assets" / "flagged_words.json") in err
    assert "process[5].perplexity_filter: sp_model_path: not set" in err
    assert str(dj_cache_home / "models" / "en.sp.model") in err
    assert "process[5].perplexity_filter: kenlm_model_path: not set" in err
    assert str(dj_cache_home / "models" / "en.arpa.bin") in err


def test_a_missing_package_and_a_missing_file_of_one_op_are_named_together():
    from djx import Filter, RecipeError

    class NeedsBoth(Filter):
        name = "needs_both_filter"
        stats_keys = ("x",)
        requires = {"djx_no_such_package": "pip install djx-no-such-package"}

        def __init__(self, model_path: str | None = None, **common):
            super().__init__(**common)

        @classmethod
        def missing_resources(cls, params):
            return [] if params["model_path"] else ["model_path: not set: set it to the model file"]

        def compute_sample(self, sample, batch):
            pass

        def keep(self, stats):
            return True

    with pytest.raises(RecipeError) as e:
        NeedsBoth()
    assert e.value.items == ["needs_both_filter: needs the Python package 'djx_no_such_package', which is not "
                             "installed: pip install djx-no-such-package",
                             "needs_both_filter: model_path: not set: set it to the model file"]


@pytest.mark.slow
@pytest.mark.models
def test_data_juicers_recipe_runs_with_only_data_and_model_paths_changed_when_its_cache_is_there(
        tmp_path, dj_cache_home, djx_cli):
    _fill(dj_cache_home)
    data = _dj_format_data(tmp_path)
    # as a Data-Juicer user types it: dj-process --config R --dataset_path D --OP.PARAM V
    res = djx_cli("process", "--config", RECIPE, "--quiet", "--dataset_path", data,
                  "--export_path", tmp_path / "out" / "refined.jsonl",
                  "--image_text_similarity_filter.hf_clip", MODELS / "tiny-clip",
                  "--image_text_matching_filter.hf_blip", MODELS / "tiny-blip-itm")
    assert res.rc == 0, res.err
    summary = json.loads((tmp_path / "out" / "refined.summary.json").read_text())
    assert len(summary["ops"]) == 13 and summary["skipped_ops"] == []
    assert summary["input"] == summary["kept"] + summary["dropped"] == len(data.read_text().splitlines())
    assert summary["check"]["ok"] is True
    by_name = {op["name"]: op for op in summary["ops"]}
    assert by_name["flagged_words_filter"]["in"] == summary["input"]  # the list from the cache was read
    assert by_name["perplexity_filter"]["in"] > 0


def test_an_op_given_its_files_reaches_a_spawned_worker_whatever_the_cache_holds(tmp_path, dj_cache_home):
    """A worker unpickles each op (its __new__ gets no parameters there): the files are checked when
    the op is made, never again where the recipe's parameters are not in view."""
    import pickle

    from djx import build_op
    pytest.importorskip("kenlm")
    sp = R.train_sentencepiece(tmp_path / "my.sp.model")
    arpa = R.write_arpa(tmp_path / "my.arpa", sp)
    (tmp_path / "words").mkdir()
    (tmp_path / "words" / "flagged_words.json").write_text(json.dumps({"en": ["badword"]}))
    op = build_op("perplexity_filter", {"sp_model_path": str(sp), "kenlm_model_path": str(arpa)})
    words = build_op("flagged_words_filter", {"flagged_words_dir": str(tmp_path / "words")})
    assert pickle.loads(pickle.dumps(op)).kenlm_model == op.kenlm_model  # Data-Juicer's cache is empty here
    assert pickle.loads(pickle.dumps(words)).vocabulary == frozenset({"badword"})


def _run_unchanged(djx_cli, recipe: str, docs: dict, export: Path) -> dict:
    """Data-Juicer's shipped `recipe` run as its user types it, with only the data and export given
    (the documents `docs`, by id): the run's summary."""
    data = export.parent.parent / "data.jsonl"
    data.write_text("".join(json.dumps({"id": k, "text": v}) + "\n" for k, v in docs.items()))
    res = djx_cli("process", "--config", ASSETS / "dj_recipes" / recipe, "--quiet", "--dataset_path", data,
                  "--export_path", export)
    assert res.rc == 0, res.err
    return json.loads(export.with_name(export.stem + ".summary.json").read_text())


@pytest.mark.slow
def test_data_juicers_pile_recipe_runs_unchanged_with_its_2e5_bounds_and_line_length_filters(
        tmp_path, dj_cache_home, djx_cli):
    """pile-philpaper-refine.yaml (shipped unchanged) writes `max_len: 5e5` and `max_num: 2e5`, which
    PyYAML reads as strings and Data-Juicer as numbers, and names the two line-length filters."""
    _fill(dj_cache_home)
    sentences = R.corpus(2000)
    docs = {f"paper{i}": "\n".join(" ".join(sentences[j:j + 10]) for j in range(i * 400, i * 400 + 400, 10))
            for i in range(4)}  # 40 lines of ~10 sentences: above min_num 1000 words
    docs["one_huge_line"] = " ".join(sentences * 60)  # ~600,000 characters on one line: over max_len 5e5
    summary = _run_unchanged(djx_cli, "pile-philpaper-refine.yaml", docs, tmp_path / "out" / "refined.jsonl")
    by_name = {op["name"]: op for op in summary["ops"]}
    assert len(summary["ops"]) == 16 and summary["skipped_ops"] == []
    assert summary["input"] == summary["kept"] + summary["dropped"] == 5 and summary["rejected"] == 0
    assert by_name["average_line_length_filter"]["dropped"] == 1
    dropped = [json.loads(line) for line in (tmp_path / "out" / "refined.dropped.jsonl").read_text().splitlines()]
    assert [d["id"] for d in dropped if "average_line_length_filter" in json.dumps(d)] == ["one_huge_line"]
    assert by_name["maximum_line_length_filter"]["in"] == by_name["words_num_filter"]["in"] == 4


@pytest.mark.slow
def test_data_juicers_bloom_recipe_runs_unchanged_and_its_word_mappers_rewrite_the_text(
        tmp_path, dj_cache_home, djx_cli):
    """bloom-oscar.yaml (shipped unchanged) names remove_words_with_incorrect_substrings_mapper and
    remove_long_words_mapper (max_len: 25) between its filters."""
    _fill(dj_cache_home)
    sentences = R.corpus(300)
    long_word = "pneumonoultramicroscopicsilicovolcanoconiosis"  # 45 characters
    docs = {f"doc{i}": " ".join(sentences[i * 30:i * 30 + 30]) + f" see https://example.com/{i} and {long_word} ."
            for i in range(4)}
    summary = _run_unchanged(djx_cli, "bloom-oscar.yaml", docs, tmp_path / "out" / "oscar.jsonl")
    assert len(summary["ops"]) == 14 and summary["skipped_ops"] == []
    assert summary["input"] == summary["kept"] + summary["dropped"] == 4 and summary["rejected"] == 0
    by_name = {op["name"]: op for op in summary["ops"]}
    assert by_name["remove_long_words_mapper"]["in"] == by_name["words_num_filter"]["in"] > 0
    texts = [json.loads(line)["text"] for name in ("oscar.jsonl", "oscar.dropped.jsonl")
             for line in (tmp_path / "out" / name).read_text().splitlines()]
    mapped = [t for t in texts if "see and" in t]  # the samples that reached the mappers, as they left them
    assert mapped and not any("https://" in t or long_word in t for t in mapped)
