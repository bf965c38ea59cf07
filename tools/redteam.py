"""Every hostile case djx has been attacked with, run as one command: a table of case -> held/broken.

    python tools/redteam.py [-k SUBSTRING] [--no-ray] [--list]

A case builds its hostile input in a fresh private folder, runs djx on it the way a user would (the
CLI in a subprocess, or the Python API), and says whether djx held: the attack ran no code, the run
did not report success on work it did not do, the error was one clear line. Cases live in
tools/redteam_cases/, one module per class of attack (found by all_cases(); export_folder.py: what
another user plants in a shared export folder). Exits 1 when any case broke.
"""
from __future__ import annotations

import argparse
import importlib.util
import sys
import tempfile
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from redteam_cases import all_cases  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-k", default="", help="run only the cases whose name contains this")
    ap.add_argument("--no-ray", action="store_true", help="leave out the cases that need Ray")
    ap.add_argument("--list", action="store_true", help="list the cases and exit")
    args = ap.parse_args()
    cases = [c for c in all_cases() if args.k in c.name]
    if args.no_ray or importlib.util.find_spec("ray") is None:
        cases = [c for c in cases if not c.needs_ray]
    if args.list:
        for c in cases:
            print(f"{c.group:10} {c.name}")
        return 0
    rows, broken = [], 0
    for case in cases:
        t0 = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="djx-redteam-") as tmp:
            try:
                held, detail = case.run(Path(tmp))
            except Exception as e:  # a case that crashes is a case that did not show djx held
                held, detail = False, f"case crashed: {type(e).__name__}: {e}"
                traceback.print_exc()
        broken += not held
        rows.append((case.group, case.name, "held" if held else "BROKEN", time.monotonic() - t0, detail))
        print(f"{rows[-1][2]:6} {case.name} ({rows[-1][3]:.1f}s): {detail}", file=sys.stderr, flush=True)
    width = max((len(r[1]) for r in rows), default=4)
    print(f"\n{'class':10} {'case':{width}} {'result':6} {'s':>6}  detail")
    for group, name, result, secs, detail in rows:
        print(f"{group:10} {name:{width}} {result:6} {secs:6.1f}  {detail}")
    print(f"\n{len(rows) - broken} held, {broken} broken, of {len(rows)}")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
