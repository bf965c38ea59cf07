"""Stop a run that fails for (nearly) every sample in the same way: a broken model or processor,
a plug-in bug, data written with another image token. Each op is watched over the samples that
reach it, in input order and whatever the batches, in windows of WINDOW: when WINDOWS windows in a
row each have at least SHARE of their samples failing with one signature (the same exception type,
or a token mismatch), the run stops with one message instead of writing an export of rejections.
A window below SHARE clears the op for the rest of the run: a dataset whose bad records sit at its
head is skewed, not broken. `stop_on_systematic_failure: false` turns the check off."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from djx.core.recipe.context import TOKEN_MISMATCH
from djx.core.records import BatchResult, Rejection

WINDOW = 32   # samples reaching an op judged together (all of them, if fewer ever reach it)
WINDOWS = 4   # windows in a row failing alike that stop the run
SHARE = 0.9   # ... and the share of a window's samples failing alike that makes it fail
SYSTEMATIC_CODES = ("op_error", TOKEN_MISMATCH)  # an OOM even alone is rejected, not systematic


@dataclass
class _Tally:
    seen: int = 0          # samples that reached the op
    with_images: int = 0   # ... of them carrying images (what a token mismatch is out of)
    failures: Counter = field(default_factory=Counter)   # signature -> count
    example: dict = field(default_factory=dict)          # signature -> first Rejection


def reach(result: BatchResult, originals: dict, n_ops: int, image_key: str) -> list[tuple[int, int, bool]]:
    """(position, last op reached, has images) of each sample of a batch that reached an op."""
    def images(pos: int) -> bool:
        record = originals[pos].record if pos in originals else None
        return isinstance(record, dict) and bool(record.get(image_key))
    from djx.core.recipe.context import DROP_KEY, POSITION_KEY
    out = [(s[POSITION_KEY], n_ops - 1, images(s[POSITION_KEY])) for s in result.kept]
    out += [(s[POSITION_KEY], s[DROP_KEY]["op_index"], images(s[POSITION_KEY])) for s in result.dropped]
    out += [(r.pos, r.op_index, images(r.pos)) for r in result.rejected if r.op_index is not None]
    return sorted(out)


class EarlyCheck:
    def __init__(self, op_names: list[str], image_token: str, image_keys: list[str]):
        self.op_names, self.image_token, self.image_keys = op_names, image_token, image_keys
        self.tallies = {k: _Tally() for k in range(len(op_names))}   # the window being filled
        self.whole = {k: _Tally() for k in range(len(op_names))}     # every sample so far
        self.failed_windows = dict.fromkeys(range(len(op_names)), 0)
        self.input: _Tally | None = _Tally()  # the records as read: JSON at all?

    def add(self, res: BatchResult) -> str | None:
        """Take a batch; the reason to stop the run, or None."""
        if self.input is not None and (why := self._tally_input(res)) is not None:
            return why
        if res.reach is None:
            return self._add_counts(res)
        failed = {(r.pos, r.op_index): r for r in res.rejected if r.code in SYSTEMATIC_CODES}
        for pos, last, has_images in res.reach:
            for k in range(last + 1):
                if k in self.tallies and (why := self._one(k, failed.get((pos, k)), has_images)) is not None:
                    return why
        return None

    def _one(self, k: int, rej: Rejection | None, has_images: bool) -> str | None:
        """One more sample reached op k (failing as `rej`, or not)."""
        for w in (self.tallies[k], self.whole[k]):
            w.seen += 1
            w.with_images += has_images
            if rej is not None:
                sig = (rej.code, rej.error)
                w.failures[sig] += 1
                w.example.setdefault(sig, rej)
        if self.tallies[k].seen < WINDOW:
            return None
        if self._systematic(k, self.tallies[k]) is None:  # a clean window: this op is cleared
            del self.tallies[k]
            return None
        self.failed_windows[k] += 1
        if self.failed_windows[k] >= WINDOWS:
            del self.tallies[k]
            return self._systematic(k, self.whole[k])
        self.tallies[k] = _Tally()
        return None

    def _add_counts(self, res: BatchResult) -> str | None:
        """An engine that does not say which sample reached which op: whole batches are counted."""
        for rej in res.rejected:
            if rej.op_index in self.tallies and rej.code in SYSTEMATIC_CODES:
                w = self.tallies[rej.op_index]
                sig = (rej.code, rej.error)
                w.failures[sig] += 1
                w.example.setdefault(sig, rej)
        for k, counts in enumerate(res.op_counts):
            w = self.tallies.get(k)
            if w is not None:
                w.seen += counts.seen
                w.with_images += counts.with_images
                if w.seen >= WINDOW:
                    del self.tallies[k]
                    if (why := self._systematic(k, w)) is not None:
                        return why
        return None

    def _tally_input(self, res: BatchResult) -> str | None:
        """The first WINDOW records: when nearly all are not JSON at all, the file is not JSON Lines
        (compressed, CSV, another format under a .jsonl name) and every sample would be rejected."""
        w = self.input
        w.seen += res.samples
        for rej in res.rejected:
            if rej.op_index is None and rej.code == "bad_input" and rej.reason.startswith("not valid JSON"):
                w.failures["json"] += 1
                w.example.setdefault("json", rej)
        if w.seen < WINDOW:
            return None
        return self._input_systematic()

    def _input_systematic(self) -> str | None:
        w, self.input = self.input, None
        n = w.failures["json"]
        if not w.seen or n < SHARE * w.seen:
            return None
        rej = w.example["json"]
        where = f"line {rej.line}" if rej.line else f"record {rej.pos}"
        return (f"{n} of the first {w.seen} records of the input are not valid JSON ({where}: "
                f"{rej.reason}). Is the dataset JSON Lines (one JSON object per line, UTF-8, not compressed)? "
                f"The run stopped and wrote no export.")

    def at_end(self) -> str | None:
        """The ops that never saw a whole window are judged on what they saw."""
        if self.input is not None and (why := self._input_systematic()) is not None:
            return why
        for k, w in sorted(self.tallies.items()):
            whole = self.whole[k] if self.whole[k].seen else w  # counted per batch: the window is all
            if whole.seen and (why := self._systematic(k, whole)) is not None:
                return why
        self.tallies.clear()
        return None

    def _systematic(self, k: int, w: _Tally) -> str | None:
        if not w.failures:
            return None
        (code, error), n = w.failures.most_common(1)[0]
        out_of = max(w.with_images if code == TOKEN_MISMATCH else w.seen, n)
        if n < SHARE * out_of:
            return None
        if code == TOKEN_MISMATCH and w.with_images == 0:  # tokens in the text, but no images at all
            return (f"op {self.op_names[k]} (process[{k}]): none of the first {w.seen} samples that reached it "
                    f"has images under image_key {self.image_keys[k]!r}, yet {n} of them have image tokens "
                    f"in their text. Check image_key (the field that lists each sample's image paths); the "
                    f"run stopped and wrote no export.")
        return _message(self.op_names[k], k, n, out_of, w.example[(code, error)], self.image_token)


def _message(op: str, k: int, n: int, out_of: int, rej: Rejection, token: str) -> str:
    if rej.code == TOKEN_MISMATCH:
        what = "have a different number of images than image tokens in their text"
        check = (f"Check image_special_token (this run uses {token!r}) and eoc_special_token in the "
                 f"recipe: the data was most likely written with another token.")
    else:
        what = f"made the op raise {rej.error}"
        check = (f"Check the op's parameters and model files (for a plug-in, its code). The first "
                 f"one said: {rej.reason}")
    return (f"op {op} (process[{k}]): {n} of the first {out_of} samples that reached it {what}. That "
            f"is systematic, not a few bad samples: the run stopped and wrote no export. {check}")
