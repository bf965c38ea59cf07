"""Which stats a sample carries that djx can vouch for.

Stats in an input decide verdicts when they are reused, so a stat is reused only when djx wrote
it: each sample djx writes carries `__djx__stats_provenance__`, naming for every stat the op that
computed it (name, parameters, model, djx version: `op_fingerprint`), the size, mtime, inode,
device and ctime of the sample's images when an image op computed one, and an HMAC-SHA256 over
the sample under this user's key (a private file, `stats_key()`). A sample edited after djx wrote
it, a stat another op or model computed, an image changed since: not vouched for, so recomputed.
Stats nobody vouches for are dropped from the sample (counted as `foreign_stats_dropped`) unless
the recipe says `trust_input_stats: true` (a dataset from Data-Juicer, say): then they are reused
as Data-Juicer would, range-checked, and kept, but never signed.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import os

from djx.core.io.llava import LLAVA_KEY
from djx.core.io.user_key import user_key
from djx.core.recipe.context import DROP_KEY, ORIGIN_POS_KEY, POSITION_KEY, STATS_KEY, RunContext
from djx.core.run.stable_params import stable

PROVENANCE_KEY = "__djx__stats_provenance__"
# djx's keys that change between runs, and the __dj__llava__ field (signed on its own, io/llava_seal.py;
# a LLaVA record read back makes it anew, without that signature)
_UNSIGNED = (PROVENANCE_KEY, POSITION_KEY, ORIGIN_POS_KEY, DROP_KEY, LLAVA_KEY)


def stats_key(home: str | None = None) -> bytes:
    """This user's key for signing stats (core/io/user_key.py); b"" when it cannot be had safely:
    nothing is signed then, and only `trust_input_stats` reuses stats."""
    return user_key(home).key


def op_fingerprint(op) -> str:
    """What makes a stat this op's: its name, the parameters that change stats (not thresholds),
    its models and djx's version."""
    from djx import __version__
    from djx.core.op.range_filter import RANGE_SWITCHES
    verdict_only = getattr(op, "verdict_params", None)
    params = {k: v for k, v in op.params().items()
              if k not in RANGE_SWITCHES and (k not in verdict_only if verdict_only is not None
                                              else not (k == "any_or_all" or k.startswith(("min_", "max_"))))}
    params = {k: stable(v) for k, v in params.items()}  # a callable by its code, not its address
    what = repr((op.name, sorted(params.items()), [repr(s) for s in op.model_specs()], __version__))
    return hashlib.sha256(what.encode()).hexdigest()[:16]


def _mac(key: bytes, sample: dict, prov: dict) -> str | None:
    """The HMAC of the sample (less djx's run keys), its vouched stats and image stamps. A field
    that is null signs as one that is absent: a parquet export holds every record's columns, so a
    record read back from it carries a null for each key it lacked (the signature still holds).
    NaN signs as Python's JSON writes it."""
    try:
        signed = {k: v for k, v in sample.items() if k not in _UNSIGNED}
        part = _SIGNING.encode(signed)
        if "null" in part:  # rare: a null somewhere (or the word in a text)
            part = _SIGNING.encode(_no_nulls(signed))
        body = f"[{part}, {_SIGNING.encode(prov['stats'])}, {_SIGNING.encode(prov.get('images'))}]"
    except (TypeError, ValueError, RecursionError):
        return None  # not JSON as is: never vouched for
    return hmac.digest(key, body.encode("utf-8", "surrogatepass"), "sha256").hex()


def _no_nulls(value):
    """`value` less the null members of its objects, at any depth (list items stay)."""
    if isinstance(value, dict):
        return {k: _no_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_no_nulls(v) for v in value]
    return value


def _exact(value):
    """A value JSON cannot hold (a parquet column's bytes, timestamp or decimal) as djx writes it
    (io/json_values.py), so that such samples are signed too; any other object is not signed."""
    from djx.core.io.json_values import tagged
    encoded = tagged(value)
    if isinstance(encoded, str):
        raise TypeError(f"{type(value).__name__} is not JSON")
    return encoded


_SIGNING = json.JSONEncoder(sort_keys=True, ensure_ascii=False, allow_nan=True, default=_exact)


def image_stamps(sample: dict, image_key: str, dataset_dir: str) -> list | None:
    """[size, mtime_ns, inode, device, ctime_ns] of each of the sample's images (None when one
    cannot be read). Size and mtime alone are the owner's to set; a file rewritten in place or
    swapped in has a new ctime or inode, which no one can set back."""
    refs = sample.get(image_key)
    if not isinstance(refs, list):
        return None
    out = []
    for ref in refs:
        try:
            st = os.stat(os.path.join(dataset_dir, ref) if isinstance(ref, str) else "")
        except (OSError, ValueError):
            return None
        out.append([st.st_size, st.st_mtime_ns, st.st_ino, st.st_dev, st.st_ctime_ns])
    return out


class StatBooks:
    """One batch's account of the stats each sample carries: which are vouched for by whom."""

    def __init__(self, ctx: RunContext, fingerprints: list[str]):
        self.ctx = ctx
        self.fingerprints = fingerprints  # each op's op_fingerprint (OpChain.fingerprints)
        self.vouched: dict[int, dict[str, str]] = {}  # position -> {stat: fingerprint}
        self.images: dict[int, list | None] = {}  # position -> the stamps the signature vouches for
        self.mapped: set[int] = set()  # positions a mapper changed: their input stats describe another sample
        self.judged: dict[int, set] = {}  # position -> the stats this run's filters computed or reused

    def take(self, sample: dict) -> int:
        """Check the provenance a sample came with (removed from it); drop the stats nobody vouches
        for unless they are trusted. Returns how many stats were dropped."""
        prov, pos = sample.pop(PROVENANCE_KEY, None), sample[POSITION_KEY]
        vouched = {}
        if (self.ctx.stats_key and isinstance(prov, dict) and isinstance(prov.get("stats"), dict)
                and isinstance(prov.get("sig"), str)):
            mac = _mac(self.ctx.stats_key, sample, prov)
            if mac is not None and hmac.compare_digest(mac, prov["sig"]):
                vouched = {k: v for k, v in prov["stats"].items() if isinstance(v, str)}
                self.images[pos] = prov.get("images")
        self.vouched[pos] = vouched
        stats = sample.get(STATS_KEY)
        if self.ctx.trust_input_stats or not isinstance(stats, dict):
            return 0
        foreign = [k for k in stats if k not in vouched]
        for k in foreign:
            del stats[k]
        return len(foreign)

    def vouches(self, k: int, op, sample: dict) -> bool:
        """Whether op k may reuse the sample's stats: djx wrote them with this very op (and the
        images are unchanged since), or the recipe trusts input stats."""
        if sample[POSITION_KEY] in self.mapped:
            return False
        if self.ctx.trust_input_stats:
            return True
        vouched = self.vouched.get(sample[POSITION_KEY], {})
        if any(vouched.get(key) != self.fingerprints[k] for key in op.stats_keys):
            return False
        if op.uses_images:
            now = image_stamps(sample, op.image_key or self.ctx.image_key, self.ctx.dataset_dir)
            return now is not None and now == self.images.get(sample[POSITION_KEY])
        return True

    def remapped(self, samples: list[dict]) -> None:
        """A mapper changed these samples: the stats they carry describe them as they were, so
        none is reused or signed as theirs from now on (run/mapped.py); those they brought from
        the input and no filter of this run judged them by are removed (a later Ray stage, which
        sees only the sample, must not reuse them either)."""
        for sample in samples:
            pos = sample[POSITION_KEY]
            self.mapped.add(pos)
            self.vouched[pos] = {}
            stats = sample.get(STATS_KEY)
            for key in [k for k in stats if k not in self.judged.get(pos, ())] if isinstance(stats, dict) else []:
                del stats[key]

    def computed(self, k: int, op, sample: dict, reused: bool) -> None:
        """Op k's stats of this sample are its own now (computed, or reused as vouched for)."""
        vouched = self.vouched.setdefault(sample[POSITION_KEY], {})
        self.judged.setdefault(sample[POSITION_KEY], set()).update(op.stats_keys)
        for key in op.stats_keys:
            if reused and self.ctx.trust_input_stats and vouched.get(key) != self.fingerprints[k]:
                vouched.pop(key, None)  # trusted, not known: kept but never signed
            else:
                vouched[key] = self.fingerprints[k]
        if op.uses_images and not reused:
            self.images[sample[POSITION_KEY]] = image_stamps(sample, op.image_key or self.ctx.image_key,
                                                              self.ctx.dataset_dir)

    def seal(self, sample: dict) -> None:
        """Sign what djx vouches for in this sample as it will be written."""
        pos = sample.get(POSITION_KEY)
        stats = sample.get(STATS_KEY)
        vouched = {k: v for k, v in self.vouched.get(pos, {}).items() if isinstance(stats, dict) and k in stats}
        if not self.ctx.stats_key or not vouched:
            return
        prov = {"stats": vouched, "images": self.images.get(pos)}
        mac = _mac(self.ctx.stats_key, sample, prov)
        if mac is not None:
            sample[PROVENANCE_KEY] = {**prov, "sig": mac}


def signed_by(key: bytes, sample: dict) -> bool:
    """Whether `sample`, as an output holds it, carries stats that `key` vouches for: its signature
    holds over the sample and every stat it carries is one the signature names (`djx check`)."""
    prov, stats = sample.get(PROVENANCE_KEY), sample.get(STATS_KEY)
    if not (key and isinstance(prov, dict) and isinstance(prov.get("stats"), dict) and isinstance(prov.get("sig"), str)):
        return not stats  # no stats, nothing to vouch for
    mac = _mac(key, sample, prov)
    return (mac is not None and hmac.compare_digest(mac, prov["sig"])
            and (not isinstance(stats, dict) or all(k in prov["stats"] for k in stats)))
