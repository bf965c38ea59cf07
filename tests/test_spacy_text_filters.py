"""text_action_filter and text_entity_dependency_filter on a tiny spaCy pipeline trained here (tagger,
tag-to-POS mapping, parser; tests/text_resources.py): Data-Juicer 1.6.1's stats and verdicts on the same
pipeline (tests/assets/dj_fixtures/text_models.json), special tokens removed first, drop reasons, bad
text rejected with a reason, and an unknown pipeline failing at load."""
from __future__ import annotations

import json
import sys

import pytest

import text_resources as R
from helpers import TESTS_DIR
from djx import STATS_KEY, Pipeline, RecipeError
from djx.core.models.pool import process_pool
from djx.core.op.registry import get_op_class
from djx.core.records import Item

FIXTURE = json.loads((TESTS_DIR / "assets" / "dj_fixtures" / "text_models.json").read_text(encoding="utf-8"))
TEXTS = FIXTURE["texts"]["spacy"]

pytestmark = [pytest.mark.slow, pytest.mark.models]


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory):
    spacy = pytest.importorskip("spacy", reason="pip install '.[spacy]' in djx's checkout")
    path = R.train_spacy_pipeline(tmp_path_factory.mktemp("spacy") / "pipeline")
    nlp = spacy.load(path)
    # the pipeline Data-Juicer ran: it annotates every text alike
    assert [R.spacy_annotations(nlp, t) for t in TEXTS] == FIXTURE["resources"]["spacy_annotations"]
    return str(path)


def kept_and_counts(op, texts):
    pipe = Pipeline(ops=[op], batch_size=4)
    kept = [s["_i"] for s in pipe.process({"text": t, "_i": i} for i, t in enumerate(texts))]
    return kept, pipe.last_counts


def all_stats(op, texts) -> list[dict]:
    """The stats `op` writes for each text, kept or dropped (text_entity_dependency_filter drops a
    text without entities whatever its thresholds)."""
    res = Pipeline(ops=[op]).chain().run([Item(i, record={"text": t, "_i": i}) for i, t in enumerate(texts)],
                                         process_pool())
    return [s[STATS_KEY] for s in sorted(res.kept + res.dropped, key=lambda s: s["_i"])]


@pytest.mark.parametrize("op_name, stat, keep_all", [
    ("text_action_filter", "num_action", {"min_action_num": 0}),
    ("text_entity_dependency_filter", "num_dependency_edges", {"min_dependency_num": 0, "any_or_all": "any"}),
])
def test_spacy_filters_give_data_juicers_stats_and_verdicts(pipeline, op_name, stat, keep_all):
    cls = get_op_class(op_name)
    got = all_stats(cls(spacy_model=pipeline, **keep_all), TEXTS)
    for case in (c for c in FIXTURE["cases"] if c["op"] == op_name):
        kept, _ = kept_and_counts(cls(spacy_model=pipeline, **case["params"]), TEXTS)
        assert kept == case["kept"], case["params"]
        for i in case["kept"]:
            assert got[i][stat] == case["stats"][str(i)][stat]


def test_special_tokens_are_removed_before_parsing(pipeline):
    op = get_op_class("text_action_filter")(spacy_model=pipeline, min_action_num=0)
    with_token, plain = all_stats(op, ["<__dj__image> she reads books <|__dj__eoc|>", "she reads books"])
    assert with_token == plain == {"num_action": 1}


def test_drop_reasons_name_the_stat_its_value_and_the_bound(pipeline):
    action = get_op_class("text_action_filter")(spacy_model=pipeline, min_action_num=2)
    (stats,) = all_stats(action, ["she reads books"])
    assert not action.keep(stats)
    assert action.drop_reason(stats) == "num_action=1 below min_action_num 2"
    edges = get_op_class("text_entity_dependency_filter")(spacy_model=pipeline, min_dependency_num=3)
    (stats,) = all_stats(edges, ["she reads books"])
    assert not edges.keep(stats)
    assert edges.drop_reason(stats).startswith(f"num_dependency_edges={stats['num_dependency_edges']}: not every")
    assert "min_dependency_num 3" in edges.drop_reason(stats)
    (empty,) = all_stats(edges, [""])
    assert empty == {"num_dependency_edges": []} and not edges.keep(empty)
    assert "no entity" in edges.drop_reason(empty)


def test_bad_text_is_rejected_with_its_reason(pipeline):
    for name in ("text_action_filter", "text_entity_dependency_filter"):
        kept, counts = kept_and_counts(get_op_class(name)(spacy_model=pipeline, min_action_num=0)
                                       if name == "text_action_filter" else
                                       get_op_class(name)(spacy_model=pipeline, min_dependency_num=0,
                                                          any_or_all="any"), ["she reads books", None, 7])
        assert kept == [0]
        assert counts["rejected"] == 2 and all(r["reason"] for r in counts["rejected_records"])


def test_an_unknown_pipeline_fails_at_load_naming_the_parameter(tmp_path, monkeypatch):
    spacy_util = pytest.importorskip("spacy.util")
    monkeypatch.setenv("DATA_JUICER_MODELS_CACHE", str(tmp_path))
    with pytest.raises(RecipeError, match=r"text_action_filter.spacy_model: 'no_such_pipeline' is neither"):
        get_op_class("text_action_filter")(spacy_model="no_such_pipeline")
    monkeypatch.setitem(sys.modules, "spacy_pkuseg", None)
    with pytest.raises(RecipeError, match=r"lang 'zh' needs the Python package 'spacy_pkuseg'"):
        get_op_class("text_action_filter")(lang="zh", spacy_model=str(tmp_path))
    if not spacy_util.is_package("en_core_web_md"):
        with pytest.raises(RecipeError, match=r"text_entity_dependency_filter: no spaCy pipeline for 'en'"):
            get_op_class("text_entity_dependency_filter")()


def test_a_run_passes_its_check_when_a_sample_with_images_has_no_entity(pipeline, tmp_path):
    """num_dependency_edges is one value per entity, not per image: empty is sound for a sample with
    images (the run's check must not call it missing)."""
    image = tmp_path / "a.png"
    image.write_bytes(b"")  # never opened: no op here reads images
    data = tmp_path / "data.jsonl"
    data.write_text(json.dumps({"text": "<__dj__image> green", "images": [str(image)]}) + "\n"
                    + json.dumps({"text": "she reads books", "images": []}) + "\n", encoding="utf-8")
    op = get_op_class("text_entity_dependency_filter")(spacy_model=pipeline, min_dependency_num=0, any_or_all="any")
    summary = Pipeline(ops=[op], np=1, start_method="fork").run(str(data), str(tmp_path / "out" / "kept.jsonl"),
                                                                   progress=False, log=lambda *a: None)
    dropped = [json.loads(line) for line in (tmp_path / "out" / "kept.dropped.jsonl").read_text().splitlines()]
    assert [d[STATS_KEY]["num_dependency_edges"] for d in dropped] == [[]]
    assert (summary["kept"], summary["dropped"], summary["rejected"]) == (1, 1, 0)


def test_both_filters_share_one_loaded_pipeline_per_process(pipeline):
    action = get_op_class("text_action_filter")(spacy_model=pipeline, min_action_num=0)
    edges = get_op_class("text_entity_dependency_filter")(spacy_model=pipeline, min_dependency_num=0)
    list(Pipeline(ops=[action, edges]).process({"text": t} for t in TEXTS))
    assert action.model == edges.model
    assert process_pool().loads[action.model.label()] == 1
