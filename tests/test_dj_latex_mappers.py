"""The ops of Data-Juicer's RedPajama arXiv and code recipes give Data-Juicer 1.6.1's output, byte for
byte: tests/assets/dj_fixtures/latex_mappers.json holds what Data-Juicer itself wrote for
remove_header_mapper, remove_comments_mapper, remove_bibliography_mapper and expand_macro_mapper with
several parameter sets on LaTeX texts made to be hard (every sectioning command, short titles,
braces that do not balance, escaped and doubled `%`, CRLF, bibliographies and appendices, \\newcommand
and \\def with and without arguments, lines that do not end in `}`, CJK, empty text), what
suffix_filter kept of records with given `__dj__suffix__` values, and what the arXiv recipe's whole
chain kept; tools/dj_fixtures/latex_mappers.py regenerates it.

Texts holding djx's special tokens: where Data-Juicer's output keeps every token, djx's is byte-equal;
where it cuts one away with the text around it, djx keeps the token where the text was cut."""
from __future__ import annotations

import json

import pytest

from djx import Pipeline, build_op, load_recipe
from djx.ops.common.special_tokens import split_at_tokens

from helpers import TESTS_DIR

FIXTURE = json.loads((TESTS_DIR / "assets" / "dj_fixtures" / "latex_mappers.json").read_text(encoding="utf-8"))
RECIPES = TESTS_DIR / "assets" / "dj_recipes"
TOKENS = ("<__dj__image>", "<|__dj__eoc|>")
CASES = [pytest.param(c, id=f"{c['op']}{c['params'] or ''}") for c in FIXTURE["cases"]]


def results(op, records: list[dict]) -> list:
    return list(Pipeline(ops=[op], batch_size=len(records)).results(records))


def mapped(case: dict, texts: list[str]) -> list[str]:
    out = results(build_op(case["op"], case["params"]), [{"i": i, "text": t} for i, t in enumerate(texts)])
    assert [r.outcome for r in out] == ["kept"] * len(texts), [r.reason for r in out if r.outcome != "kept"]
    return [r.sample["text"] for r in out]  # in input order


def tokens_of(text: str) -> list[str]:
    return split_at_tokens(text, TOKENS)[1::2]


def test_the_fixture_is_data_juicers_and_each_case_changes_texts():
    assert FIXTURE["data_juicer"] == "1.6.1"
    assert {c["op"] for c in FIXTURE["cases"]} == {"remove_header_mapper", "remove_comments_mapper",
                                                   "remove_bibliography_mapper", "expand_macro_mapper"}
    for case in FIXTURE["cases"]:
        for kind, texts in FIXTURE["texts"].items():
            assert len(case["output"][kind]) == len(texts)
        changed = sum(a != b for a, b in zip(FIXTURE["texts"]["plain"], case["output"]["plain"]))
        assert changed >= 5 or case["params"] == {"inline": False, "multiline": False}, case["params"]
    # Data-Juicer both keeps and cuts away tokens among the token texts: both branches below are tested
    kept = [tokens_of(t) == tokens_of(o) for c in FIXTURE["cases"]
            for t, o in zip(FIXTURE["texts"]["tokens"], c["output"]["tokens"])]
    assert any(kept) and not all(kept)


@pytest.mark.parametrize("case", CASES)
def test_mapped_text_is_byte_equal_to_data_juicers(case):
    assert mapped(case, FIXTURE["texts"]["plain"]) == case["output"]["plain"]


@pytest.mark.parametrize("case", CASES)
def test_with_special_tokens_djx_equals_data_juicer_where_data_juicer_keeps_them(case):
    texts, theirs = FIXTURE["texts"]["tokens"], case["output"]["tokens"]
    for text, dj, djx in zip(texts, theirs, mapped(case, texts)):
        if case["op"] == "remove_header_mapper" and case["params"].get("drop_no_head", True) and dj == "":
            assert djx == "", text  # a text without a header goes whole, tokens too: the sample is to be dropped
            continue
        assert tokens_of(djx) == tokens_of(text), (text, djx)
        if tokens_of(dj) == tokens_of(text):
            assert djx == dj, text


@pytest.mark.parametrize("op, params", [("remove_header_mapper", {}), ("remove_header_mapper", {"drop_no_head": False}),
                                        ("remove_bibliography_mapper", {})])
def test_where_data_juicer_cuts_tokens_away_with_the_text_djx_cuts_the_text_and_keeps_the_tokens(op, params):
    """The preamble's tokens stay at the start of the text, the bibliography's at its end."""
    (case,) = [c for c in FIXTURE["cases"] if c["op"] == op and c["params"] == params]
    texts, theirs = FIXTURE["texts"]["tokens"], case["output"]["tokens"]
    cut = 0
    for text, dj, djx in zip(texts, theirs, mapped(case, texts)):
        if op == "remove_header_mapper" and params.get("drop_no_head", True) and dj == "":
            assert djx == "", text  # no header: the sample is to be dropped, its tokens with it
            continue
        lost = tokens_of(text)[:len(tokens_of(text)) - len(tokens_of(dj))]
        if op == "remove_bibliography_mapper":
            lost = tokens_of(text)[len(tokens_of(dj)):]
        if lost and dj in text:  # Data-Juicer cut a piece off, tokens and all
            cut += 1
            assert djx == ("".join(lost) + dj if op == "remove_header_mapper" else dj + "".join(lost)), text
    assert cut >= 1


def test_a_comment_that_takes_a_token_in_loses_its_text_and_keeps_the_token():
    op = build_op("remove_comments_mapper", {})
    (r,) = results(op, [{"text": "text %<__dj__image> a comment\nmore <__dj__image>% glued\nend"}])
    assert r.sample["text"] == "text<__dj__image>\nmore <__dj__image>\nend"


def test_suffix_filter_keeps_what_data_juicer_keeps():
    records = [{"id": i, "text": f"code {i}", "__dj__suffix__": s} for i, s in enumerate(FIXTURE["suffixes"])]
    assert {len(c["kept"]) for c in FIXTURE["suffix_cases"]} >= {0, 1, 2, 3, len(records)}
    for case in FIXTURE["suffix_cases"]:
        out = results(build_op("suffix_filter", case["params"]), records)
        assert sorted(r.sample["id"] for r in out if r.outcome == "kept") == case["kept"], case["params"]
        assert {r.outcome for r in out} <= {"kept", "dropped"}


def test_a_sample_without_a_suffix_is_rejected_with_the_reason_not_dropped():
    op = build_op("suffix_filter", {"suffixes": [".py"]})
    records = [{"id": 0, "text": "x"}, {"id": 1, "text": "x", "__dj__suffix__": None},
               {"id": 2, "text": "x", "__dj__suffix__": 7}, {"id": 3, "__dj__suffix__": ".py"},
               {"id": 4, "text": "x", "__dj__suffix__": ".c"}]
    out = results(op, records)
    for i in (0, 1, 2):
        assert (out[i].outcome, out[i].code) == ("rejected", "bad_input")
        assert "__dj__suffix__" in out[i].reason and "suffix_filter" in out[i].reason
    assert "has int 7 as its" in out[2].reason
    assert out[3].outcome == "kept" and out[3].sample["__dj__stats__"]["suffix"] == ".py"  # no text needed
    assert (out[4].outcome, out[4].reason) == ("dropped", "suffix='.c' not in suffixes ['.py']")


def test_macros_that_double_each_other_are_rejected_past_the_work_budget():
    chain = "".join(f"\\newcommand{{\\m{i}}}{{\\m{i + 1} \\m{i + 1} }}\n" for i in range(30)) + "\\m0 .\n"
    (r,) = results(build_op("expand_macro_mapper", {"work_budget": 1_000_000}), [{"text": chain}])
    assert (r.outcome, r.code) == ("rejected", "work_budget") and "work_budget=1000000" in r.reason
    (r,) = results(build_op("expand_macro_mapper", {"work_budget": 1_000_000}), [{"text": chain[-40:]}])
    assert r.outcome == "kept"


def test_texts_that_make_a_backtracking_matcher_work_quadratically_are_mapped_as_data_juicer_defines():
    """Data-Juicer's patterns backtrack on these for hours; djx's one-pass search maps each (the test
    would hang, not fail, were it quadratic again). None has a closing brace, so no header,
    bibliography or macro is found; a comment runs from the first `a%` to the end of the line."""
    texts = ["\\section[" * 20_000 + "]{" * 20_000, "\\section{" * 40_000, "\\bibliography{" * 30_000,
             "\\newcommand{\\a}{" * 30_000, "\\def   \\x {" * 30_000, "a%" * 200_000]
    want = {"remove_header_mapper": [""] * 6, "remove_comments_mapper": texts[:5] + [""],
            "remove_bibliography_mapper": texts, "expand_macro_mapper": texts}
    for name, expected in want.items():
        assert [r.sample["text"] for r in results(build_op(name, {}), [{"text": t} for t in texts])] == expected, name
    closed = "\\section{" * 40_000 + "}"
    assert [r.sample["text"] for r in results(build_op("remove_header_mapper", {}), [{"text": closed}])] == [closed]


def test_thousands_of_macros_in_a_long_text_are_rejected_past_the_work_budget():
    """Each macro is one pass over the whole text (Data-Juicer's order): 20,000 of them in 800 KB would
    be 16 G characters scanned; the passes count against work_budget, so the sample is rejected
    instead, while a paper's hundred macros over a megabyte pass."""
    many = "\n".join(f"\\def\\m{i:05d}{{v}}" for i in range(20_000)) + "\n" + "body text " * 50_000
    paper = "\n".join(f"\\newcommand{{\\R{i}}}{{\\mathbb{{R}}}}" for i in range(100)) + "\n" + "We use \\R7 here. " * 60_000
    rejected, kept = results(build_op("expand_macro_mapper", {}), [{"text": many}, {"text": paper}])
    assert (rejected.outcome, rejected.code) == ("rejected", "work_budget")
    assert kept.outcome == "kept" and kept.sample["text"].count("We use \\mathbb{R} here. ") == 60_000


def test_both_redpajama_recipes_load_in_djx(tmp_path):
    given = {"dataset_path": str(tmp_path / "data.jsonl"), "export_path": str(tmp_path / "out.jsonl")}
    arxiv = [op.name for op in load_recipe(str(RECIPES / "redpajama-arxiv.yaml"), given).build_ops()]
    assert arxiv == ["remove_header_mapper", "remove_comments_mapper", "remove_bibliography_mapper",
                     "expand_macro_mapper", "text_length_filter"]
    # its second alphanumeric_filter counts tokens: Data-Juicer's Pythia tokenizer, from a local folder here
    tokenizer = {"process.5.alphanumeric_filter.hf_tokenizer": str(TESTS_DIR / "assets" / "models" / "tiny-clip")}
    code = load_recipe(str(RECIPES / "redpajama-code.yaml"), {**given, **tokenizer}).build_ops()
    assert [op.name for op in code][-1] == "suffix_filter" and len(code) == 7
    assert {".py", "Dockerfile", ".C", ".c"} <= set(code[-1].suffixes)


@pytest.mark.slow
def test_data_juicers_arxiv_recipe_runs_unchanged_and_keeps_what_data_juicer_kept(tmp_path, djx_cli):
    texts = FIXTURE["texts"]["plain"]
    data = tmp_path / "arxiv.jsonl"
    data.write_text("".join(json.dumps({"id": i, "text": t}, ensure_ascii=False) + "\n" for i, t in enumerate(texts)),
                    encoding="utf-8")
    export = tmp_path / "out" / "arxiv.jsonl"
    res = djx_cli("process", "--config", RECIPES / "redpajama-arxiv.yaml", "--quiet", "--dataset_path", data,
                  "--export_path", export)
    assert res.rc == 0, res.err
    summary = json.loads(export.with_name("arxiv.summary.json").read_text())
    assert len(summary["ops"]) == 5 and summary["skipped_ops"] == [] and summary["rejected"] == 0
    assert summary["check"]["ok"] is True
    kept = {str(r["id"]): r["text"] for r in map(json.loads, export.read_text(encoding="utf-8").splitlines())}
    assert kept == FIXTURE["arxiv_recipe"]["kept"]
    assert summary["dropped"] == len(texts) - len(kept) > 0


@pytest.mark.slow
def test_read_from_files_a_record_without_a_suffix_gets_its_files_as_data_juicers_reader_gives_it(
        tmp_path, write_recipe, djx_cli):
    """Data-Juicer's reader fills __dj__suffix__ from the data file when a recipe has a suffix_filter:
    `suffixes: []` keeps every record, `.py` drops a .jsonl file's records (dropped, not rejected),
    and a record's own suffix is kept."""
    (tmp_path / "d.jsonl").write_text("".join(json.dumps(r) + "\n" for r in [
        {"id": 0, "text": "a"}, {"id": 1, "text": "b", "__dj__suffix__": ".py"}]))
    kept = {}
    for name, suffixes in (("none", []), ("py", [".py"]), ("jsonl", [".jsonl"])):
        recipe = write_recipe(tmp_path / f"{name}.yaml", dataset_path="d.jsonl", export_path=f"{name}/o.jsonl", np=1,
                              start_method="fork", process=[{"suffix_filter": {"suffixes": suffixes}}])
        assert djx_cli("process", recipe, "--quiet").rc == 0
        kept[name] = [(r["id"], r["__dj__suffix__"]) for r in map(json.loads, (tmp_path / name / "o.jsonl").open())]
        assert not (tmp_path / name / "o.rejected.jsonl").read_text()
    assert kept == {"none": [(0, ".jsonl"), (1, ".py")], "py": [(1, ".py")], "jsonl": [(0, ".jsonl")]}
