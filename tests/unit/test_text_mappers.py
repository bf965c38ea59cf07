"""The text mappers: what each does to a text, their parameters checked at build, and the special
tokens they never change, whatever the text around them (tags, links, emails, punctuation, full
width) and whichever tokens the run configures. Run in this process through Pipeline.process."""
from __future__ import annotations

import pytest

from djx import DjxError, Pipeline, RecipeError, RunContext, build_op
from djx.ops.common.special_tokens import (TokenMade, map_between_tokens, map_keeping_tokens, special_tokens,
                                          split_at_tokens)

IMG, EOC = "<__dj__image>", "<|__dj__eoc|>"
MAPPERS = ["fix_unicode_mapper", "punctuation_normalization_mapper", "whitespace_normalization_mapper",
           "clean_links_mapper", "clean_email_mapper", "clean_html_mapper"]
NEEDS = {"fix_unicode_mapper": "ftfy", "clean_html_mapper": "selectolax"}


def mapper(name: str, **params):
    if name in NEEDS:
        pytest.importorskip(NEEDS[name])
    return build_op(name, params)


def run(ops, texts, **settings) -> tuple[list[str | None], list[dict]]:
    """Each text's mapped text (None where rejected) and the rejected records."""
    pipe = Pipeline(ops=ops, batch_size=len(texts), **settings)
    kept = {s["i"]: s["text"] for s in pipe.process([{"i": i, "text": t} for i, t in enumerate(texts)])}
    return [kept.get(i) for i in range(len(texts))], pipe.last_counts["rejected_records"]


# texts built to tempt a mapper into changing a token: tokens inside tags and attributes, glued to
# links, emails and punctuation, in full-width text, at the text's ends next to whitespace
TEMPTING = [
    f"<p>{IMG}Hello &amp; bye</p>",
    f'<a href="http://x.com/{IMG}">link</a> after <img src="{IMG}"> <{IMG}>',
    f"mail me at a@b.com{IMG} or see http://x.com/{IMG}, www.site.com/{IMG}path",
    f"user{IMG}@example.com {EOC}user@example.com{EOC}",
    f"  {IMG}\t text \u3000{EOC}  ",
    f"ＡＢ{IMG}（全角）：{EOC}“{IMG}”…{IMG}—",
    f"<b>bold {IMG} text</b><script>x{IMG}</script><style>{EOC}</style>",
    f"doesnÃ¢â‚¬â„¢t{IMG}Ã©tÃ©{EOC}",
    f"{IMG}{IMG}{EOC}{EOC}",
]


def tokens_of(text: str, tokens=(IMG, EOC)) -> list[str]:
    return split_at_tokens(text, tokens)[1::2]


@pytest.mark.parametrize("name", MAPPERS)
def test_no_mapper_changes_a_special_token(name):
    out, rejected = run([mapper(name)], TEMPTING)
    assert rejected == []
    for before, after in zip(TEMPTING, out):
        assert tokens_of(after) == tokens_of(before), (before, after)


@pytest.mark.parametrize("name", MAPPERS)
def test_no_mapper_changes_configured_tokens(name):
    img, eoc = "<image>", "[EOC]"
    texts = [t.replace(IMG, img).replace(EOC, eoc) for t in TEMPTING] + [f"<li>{img}</li><ol>{eoc}"]
    out, rejected = run([mapper(name)], texts, image_special_token=img, eoc_special_token=eoc)
    assert rejected == []
    for before, after in zip(texts, out):
        assert tokens_of(after, (img, eoc)) == tokens_of(before, (img, eoc)), (before, after)


@pytest.mark.parametrize("name, text", [
    ("punctuation_normalization_mapper", "〈__dj__image〉 a cat"),
    ("clean_html_mapper", "&lt;__dj__image&gt; a cat"),
    ("fix_unicode_mapper", "&lt;__dj__image&gt; a cat"),
    ("fix_unicode_mapper", "＜__dj__image＞"),
])
def test_a_mapper_that_would_make_a_token_rejects_the_sample_saying_so(name, text):
    op = mapper(name, **({"normalization": "NFKC"} if "＜" in text else {}))
    out, rejected = run([op], [text, "plain"])
    assert out[0] is None and out[1] is not None
    (rec,) = rejected
    assert rec["code"] == "token_made" and rec["op"] == name
    assert "'<__dj__image>' 0 -> 1" in rec["reason"] and rec["record"]["text"] == text


def test_map_between_tokens_applies_the_function_between_tokens_only():
    assert map_between_tokens(f"ab{IMG}cd{EOC}", (IMG, EOC), str.upper) == f"AB{IMG}CD{EOC}"
    assert map_between_tokens("", (IMG,), str.upper) == ""
    with pytest.raises(TokenMade):
        map_between_tokens("x", (IMG,), lambda s: IMG)
    # a longer token wins where one token holds another
    assert split_at_tokens("a<tok>>b", ("<tok>", "<tok>>")) == ["a", "<tok>>", "b"]
    assert special_tokens(RunContext(image_special_token="[I]", eoc_special_token="[E]")) == ("[I]", "[E]")


def test_map_keeping_tokens_shows_the_whole_text_and_falls_back_where_a_placeholder_is_lost():
    import re
    # the function sees one text: only its ends are stripped, not the stretches around tokens
    assert map_keeping_tokens(f" a {IMG} b ", (IMG,), str.strip) == f"a {IMG} b"
    # a pattern that takes the placeholder in: applied between the tokens instead
    assert map_keeping_tokens(f"a x{IMG}y b", (IMG,), lambda s: re.sub(r"x\S*", "", s)) == f"a {IMG}y b"
    # placeholders are characters the text lacks, whatever it holds
    crowded = "".join(map(chr, range(0xE000, 0xE010))) + IMG + "z"
    assert map_keeping_tokens(crowded, (IMG,), str.upper) == crowded[:16] + IMG + "Z"
    with pytest.raises(TokenMade):
        map_keeping_tokens(f"{IMG} &lt;", (IMG,), lambda s: s.replace("&lt;", IMG))


def test_punctuation_normalization_maps_unicode_punctuation_to_ascii():
    out, _ = run([mapper("punctuation_normalization_mapper")], ["“Hi，” she said — ok… 【x】（y）！"])
    assert out == ['"Hi," she said  -  ok... [x](y)!']


def test_whitespace_normalization_strips_the_ends_and_turns_unicode_spaces_to_spaces():
    out, _ = run([mapper("whitespace_normalization_mapper")], ["\t a\tb\u00a0c\u3000d\u200be\nf  \n", " \t "])
    assert out == ["a b c d e\nf", ""]


def test_clean_links_and_clean_email_remove_or_replace_matches():
    text = "see https://a.org/x?y=1 or write to jo.e+x@mail.co now"
    links, _ = run([mapper("clean_links_mapper")], [text])
    assert links == ["see  or write to jo.e+x@mail.co now"]
    email, _ = run([mapper("clean_email_mapper", repl="[EMAIL]")], [text])
    assert email == ["see https://a.org/x?y=1 or write to [EMAIL] now"]
    raw, _ = run([mapper("clean_email_mapper", pattern=r"r'\d+'", repl="#")], ["a 12 b 3"])
    assert raw == ["a # b #"]  # a raw-string literal is taken as its content, as Data-Juicer does


def test_fix_unicode_fixes_mojibake_and_normalizes():
    out, _ = run([mapper("fix_unicode_mapper")], ["doesnÃ¢â‚¬â„¢t", "Cafe\u0301"])
    assert out == ["doesn't", "Caf\u00e9"]
    nfd, _ = run([mapper("fix_unicode_mapper", normalization="nfd")], ["Caf\u00e9"])
    assert nfd == ["Cafe\u0301"]


def test_fix_unicode_gives_ftfys_text_for_every_ascii_text_it_does_not_pass_to_ftfy():
    """The mapper returns plain ASCII text without calling ftfy: what ftfy gives must be that text
    (for all 128 ASCII characters, alone and in random mixes, in every form), and the ASCII that ftfy
    does change (control characters, \\r, HTML entities) must still be changed."""
    ftfy = pytest.importorskip("ftfy")
    import random
    rng = random.Random(7)
    singles = [chr(c) for c in range(128)]
    mixes = ["".join(rng.choice(singles) for _ in range(rng.randint(1, 60))) for _ in range(1500)]
    near = ["a &amp; b", "x&lt;y", "line\r\nnext", "bell\x07", "del\x7f", "tab\tand\nline", "&#x2019;s"]
    for form in ("NFC", "NFKC", "NFD", "NFKD"):
        op = mapper("fix_unicode_mapper", normalization=form)
        for text in singles + mixes + near:
            assert op.map_text(text) == ftfy.fix_text(text, normalization=form), (form, text)
    changed = mapper("fix_unicode_mapper")
    assert [changed.map_text(t) for t in ("a &amp; b", "x\r\ny", "bell\x07")] == ["a & b", "x\ny", "bell"]


def test_clean_html_keeps_the_text_and_starts_list_items_on_new_lines():
    out, _ = run([mapper("clean_html_mapper")], ["<p>Hi &amp; bye</p><ul><li>one</li><li>two</li></ul>"])
    assert out == ["Hi & bye\n*one\n*two"]


@pytest.mark.parametrize("name, params, says", [
    ("fix_unicode_mapper", {"normalization": "NFX"}, "'NFX' is not one of NFC, NFKC, NFD, NFKD"),
    ("clean_links_mapper", {"pattern": "(unclosed"}, "'(unclosed' is not a regular expression"),
    ("clean_email_mapper", {"pattern": "[a-"}, "is not a regular expression"),
    ("clean_email_mapper", {"repl": 3}, "repl"),
    ("whitespace_normalization_mapper", {"strip": True}, "strip"),
])
def test_bad_parameters_fail_when_the_op_is_built(name, params, says):
    if name in NEEDS:
        pytest.importorskip(NEEDS[name])
    with pytest.raises(DjxError, match=None) as e:
        build_op(name, params)
    assert says in str(e.value)


@pytest.mark.parametrize("name", MAPPERS)
def test_a_sample_without_a_text_string_is_rejected_with_the_reason(name):
    pipe = Pipeline(ops=[mapper(name)], batch_size=4)
    kept = list(pipe.process([{"text": None}, {"other": "x"}, {"text": ["a"]}, {"text": "fine"}]))
    assert [s["text"] for s in kept] == ["fine"]
    reasons = [r["reason"] for r in pipe.last_counts["rejected_records"]]
    assert reasons == ["text key 'text' is not a string (got NoneType)", "missing text key 'text'",
                       "text key 'text' is not a string (got list)"]


def test_a_replacement_naming_a_group_the_pattern_lacks_fails_when_built():
    with pytest.raises(RecipeError, match=r"clean_email_mapper.repl: '\\\\9' is not a replacement"):
        build_op("clean_email_mapper", {"repl": r"\9"})
    op = build_op("clean_email_mapper", {"pattern": r"(?P<user>\w+)@(\w+)\.com", "repl": r"\g<user> at \2"})
    assert run([op], ["write jo@mail.com"])[0] == ["write jo at mail"]
