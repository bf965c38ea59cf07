"""Regenerate ops/common/emoji_chars.py: the one-character emoji of the `emoji` package at the
version Data-Juicer 1.6.1 pins (emoji==2.2.0), which are part of its SPECIAL_CHARACTERS.

    /work/dj-venv/bin/python tools/dj_fixtures/emoji_chars.py

Run it with an interpreter that has emoji 2.2.0 (Data-Juicer's venv has it); any other version is
refused, since each release adds characters and Data-Juicer's numbers follow the pinned one.
"""
from __future__ import annotations

from pathlib import Path

OUT = Path(__file__).resolve().parents[2] / "ops" / "common" / "emoji_chars.py"
PINNED = "2.2.0"


def ranges(code_points: list[int]) -> list[tuple[int, int]]:
    out: list[list[int]] = []
    for c in sorted(code_points):
        if out and out[-1][1] == c - 1:
            out[-1][1] = c
        else:
            out.append([c, c])
    return [(a, b) for a, b in out]


def main() -> None:
    import emoji
    if emoji.__version__ != PINNED:
        raise SystemExit(f"this needs emoji {PINNED} (Data-Juicer 1.6.1's pin), not {emoji.__version__}")
    singles = [ord(e) for e in emoji.EMOJI_DATA if len(e) == 1]
    rows = ranges(singles)
    lines = [f"    (0x{a:X}, 0x{b:X})," for a, b in rows]
    OUT.write_text(
        '"""The one-character emoji of the `emoji` package 2.2.0, the version Data-Juicer 1.6.1 pins: part of\n'
        "its SPECIAL_CHARACTERS, whatever `emoji` release is installed beside djx (later ones add characters).\n"
        f"{len(singles)} code points in {len(rows)} ranges, inclusive; written by tools/dj_fixtures/emoji_chars.py.\n"
        '"""\n\n'
        "EMOJI_RANGES = (\n" + "\n".join(lines) + "\n)\n"
        f"EMOJI_COUNT = {len(singles)}\n", encoding="utf-8")
    print(f"{len(singles)} emoji in {len(rows)} ranges -> {OUT}")


if __name__ == "__main__":
    main()
