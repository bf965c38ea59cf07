"""The stats signature's canonical form (core/run/provenance.py _mac): what changes it and what does not."""
from __future__ import annotations

import hashlib
import hmac
import json

from djx.core.run.provenance import _mac

KEY = b"k" * 32
PROV = {"stats": {"text_len": "0123456789abcdef"}, "images": None}


def test_a_sample_without_nulls_signs_as_earlier_djx_versions_signed_it():
    """Exports djx wrote before keep their signatures: the same bytes are signed."""
    sample = {"id": "a", "text": "caf\u00e9 <__dj__image>", "images": ["x.jpg"], "__dj__stats__": {"text_len": 5},
              "__dj__pos__": 3, "meta": {"b": [1, 2.5, True], "a": "z"}}
    body = json.dumps([{k: v for k, v in sample.items() if k != "__dj__pos__"}, PROV["stats"], None],
                      sort_keys=True, ensure_ascii=False, allow_nan=False)
    assert _mac(KEY, sample, PROV) == hmac.new(KEY, body.encode(), hashlib.sha256).hexdigest()


def test_a_null_field_signs_as_an_absent_one_at_any_depth_but_not_a_null_list_item():
    """A parquet export holds every record's columns (and every struct's fields): a record read
    back carries nulls for what it lacked, and its signature still holds."""
    bare = {"id": "a", "text": "x", "meta": {"a": 1, "tags": [{"k": 1}]}, "__dj__stats__": {"text_len": 1}}
    read_back = {"id": "a", "text": "x", "url": None, "meta": {"a": 1, "b": None, "tags": [{"k": 1, "v": None}]},
                 "__dj__stats__": {"text_len": 1}}
    assert _mac(KEY, bare, PROV) == _mac(KEY, read_back, PROV)
    assert _mac(KEY, {**bare, "list": [1, None]}, PROV) != _mac(KEY, {**bare, "list": [1]}, PROV)
    assert _mac(KEY, {**bare, "text": "y"}, PROV) != _mac(KEY, bare, PROV)
    assert _mac(KEY, {**bare, "note": "null"}, PROV) != _mac(KEY, bare, PROV)  # the word is a value


def test_a_sample_holding_nan_is_signed():
    """Python's JSON reads and writes NaN: such a sample's stats are vouched for like any other's."""
    sample = {"text": "x", "v": float("nan"), "__dj__stats__": {"text_len": 1}}
    assert _mac(KEY, sample, PROV) is not None
    assert _mac(KEY, sample, PROV) != _mac(KEY, {**sample, "v": 1.0}, PROV)


def test_what_json_cannot_hold_is_not_signed():
    loop: dict = {}
    loop["self"] = loop
    assert _mac(KEY, {"text": "x", "obj": object()}, PROV) is None
    assert _mac(KEY, {"text": "x", "loop": loop}, PROV) is None


def test_the_llava_field_is_left_to_its_own_signature():
    """A LLaVA record read back makes its __dj__llava__ field anew (without the field's own
    signature): the stats signature does not cover it, so it holds for such a record."""
    sample = {"id": "0", "text": "[[human]]: <__dj__image>\nhi", "images": ["a.jpg"], "__dj__stats__": {"text_len": 5}}
    written = {**sample, "__dj__llava__": {"text": "f00d", "orig": {"id": 0}, "sig": "abc"}}
    read_back = {**sample, "__dj__llava__": {"text": "f00d", "orig": {"id": 0}}}
    assert _mac(KEY, written, PROV) == _mac(KEY, read_back, PROV) == _mac(KEY, sample, PROV)
