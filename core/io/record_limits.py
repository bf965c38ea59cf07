"""What a parsed record must be to go on: writable back out as UTF-8 JSON and picklable to a worker.

Python's JSON parser accepts a lone surrogate escape ("\\ud800") and nesting up to the recursion
limit, but such a record cannot be encoded as UTF-8, and deep nesting overflows pickle and the
encoder, killing the run wherever the record goes next. Checking where records are parsed turns
each into a rejection of that record alone. Both checks are a C-speed scan of the text unless it
holds a surrogate escape or many brackets.
"""
from __future__ import annotations

import json
import re

MAX_RECORD_BYTES = 1 << 30  # one input record (a JSON line, a parquet row) at most: recipe max_record_bytes
MAX_DEPTH = 100  # pickle and the JSON encoder stay far from Python's recursion limit (1000)
_SURROGATE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}|[\ud800-\udfff]")


def record_problem(record, text: str) -> str | None:
    """Why `record`, parsed from the JSON `text`, cannot be processed; None when it can."""
    if text.count("[") + text.count("{") > MAX_DEPTH and _deeper_than(record, MAX_DEPTH):
        return too_deep()
    if _SURROGATE.search(text):
        try:
            json.dumps(record, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError as e:
            return (f"holds a lone surrogate {e.object[e.start:e.end]!r} (a \\ud800-\\udfff escape "
                    f"without its pair): not valid Unicode, so it cannot be written as UTF-8")
    return None


def too_large(what: str, size: int, limit: int) -> str:
    return (f"{what} is {size:,} bytes, over max_record_bytes ({limit:,}); raise max_record_bytes in "
            f"the recipe to take it")


def too_deep() -> str:
    return (f"nested deeper than {MAX_DEPTH} levels of arrays and objects; djx takes records "
            f"nested at most {MAX_DEPTH} deep")


def _deeper_than(value, limit: int) -> bool:
    stack = [(value, 1)]
    while stack:
        v, depth = stack.pop()
        children = v.values() if isinstance(v, dict) else v if isinstance(v, list) else None
        if children is None:
            continue
        if depth > limit:
            return True
        stack.extend((c, depth + 1) for c in children)
    return False


def output_problem(value) -> str | None:
    """Why a sample (or its stats) that ops produced cannot be written out as UTF-8 JSON; None
    when it can. Ops run plug-in code, which can put anything into a sample."""
    from djx.core.io.writers import encode_line
    return encoded(value, encode_line)[1]


def encoded(value, encode) -> tuple[bytes | None, str | None]:
    """(`encode(value)`, None), or (None, why it cannot be written) when encoding fails on what
    a plug-in put into the sample: a lone surrogate, a reference cycle, nesting too deep."""
    try:
        return encode(value), None
    except UnicodeEncodeError as e:
        return None, (f"holds a lone surrogate {e.object[e.start:e.end]!r} (not valid Unicode), so it cannot be "
                      f"written as UTF-8")
    except (RecursionError, ValueError) as e:  # nested too deep, or a reference cycle
        return None, f"cannot be written as JSON ({type(e).__name__}: {e})"
