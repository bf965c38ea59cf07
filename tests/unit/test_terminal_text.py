"""safe(): what a dataset controls is printed without its control characters acting on the terminal."""
from djx.core.io.terminal_text import safe


def test_control_sequences_and_bidi_overrides_become_visible_escapes():
    hostile = "ok\x1b[1A\x1b[2K\rsample 0: kept\n  check: passed\x00 \u202egnp.exe \x9b \x7f"
    out = safe(hostile)
    assert not any(c in out for c in "\x1b\r\n\x00\u202e\x9b\x7f")
    assert out == "ok\\x1b[1A\\x1b[2K\\rsample 0: kept\\n  check: passed\\x00 \\u202egnp.exe \\x9b \\x7f"


def test_ordinary_text_tabs_and_other_scripts_are_left_as_they_are():
    text = "Ein Hund\tim Schnee — 雪の中の犬 🐕 «ok»"
    assert safe(text) == text


def test_long_text_is_cut_saying_how_long_it_was():
    assert safe("x" * 5000, limit=40) == "x" * 40 + "... (5,000 characters)"
    assert safe(12) == "12"
