"""Which `__dj__llava__` fields djx wrote. The field holds what a record's LLaVA form cannot be told
from its text (the turns as read, the image of a text-only record, keys the mapping took the place
of), and `djx_to_llava` writes it back: one that someone planted in a djx-format input would put
hidden turns, an image or keys into a LLaVA export after every filter passed the record as its
text. So djx signs the field it writes under this user's key (core/io/user_key.py), and a field in
a djx-format input that the key did not sign is dropped, never taken from."""
from __future__ import annotations

from djx.core.io.llava import LLAVA_KEY
from djx.core.io.user_key import mac, signed

_SIG = "sig"


def seal_llava(record: dict, key: bytes) -> None:
    """Sign the record's `__dj__llava__` field, in place (nothing without a key or a field)."""
    hidden = record.get(LLAVA_KEY)
    if not isinstance(hidden, dict):
        return
    body = {k: v for k, v in hidden.items() if k != _SIG}
    sig = mac(key, body)
    record[LLAVA_KEY] = {**body, _SIG: sig} if sig else body


def drop_foreign_llava(record: dict, key: bytes) -> bool:
    """Remove the record's `__dj__llava__` field unless this user's key signed it; whether it did."""
    if LLAVA_KEY not in record:
        return False
    hidden = record[LLAVA_KEY]
    if isinstance(hidden, dict) and signed(key, {k: v for k, v in hidden.items() if k != _SIG}, hidden.get(_SIG)):
        return False
    del record[LLAVA_KEY]
    return True
