"""LLaVA's data format and djx's, one record at a time, mapped as Data-Juicer's conversion tools map
them (tools/fmt_conversion/multimodal: llava_to_dj.py and dj_to_llava.py).

A LLaVA record: `id`, `image` (one path) and `conversations`, a list of (human, gpt) turns
`{"from": ..., "value": ...}` whose first human turn starts or ends with LLaVA's `<image>`. Its djx
record: the same `id` (a string, `str_id`), the turns as one text
`[[human]]: <image>\\nQ\\n[[gpt]]: A <|__dj__eoc|>` (LLaVA's `<image>` becomes the run's image token),
`images: [image]`, and every other key as it was. What the text cannot say again (a value with
spaces around it, an integer id, a key the text or images took the place of, the questions under
`only_keep_caption`) travels under `__dj__llava__`, so a record that no op changed goes back to LLaVA
exactly as it came.
"""
from __future__ import annotations

import hashlib
import random
import re
from dataclasses import dataclass, fields

LLAVA_KEY = "__dj__llava__"
_ROLE = re.compile(r"\[\[([a-zA-Z]*?)\]\]: ")  # Data-Juicer's role pattern (dj_to_llava.py)
_MISSING = object()


class FormatError(ValueError):
    """A record that is not in the format it was read or written as; the message says why."""


@dataclass(frozen=True)
class LlavaOptions:
    """Data-Juicer's conversion parameters (same names and defaults), plus where a run writes to."""
    image_token: str = "<image>"           # LLaVA's image token (the tools' image_special_token)
    str_id: bool = True
    split_chunk: bool = False
    image_broadcast: bool = False
    image_broadcast_pos: str = "random"    # before, after, follow, or random (seeded by the record's id)
    add_eoc_at_last: bool = True
    sent_separator: str = "\n"
    only_keep_caption: bool = False
    keep_only_first_image: bool = True     # dj_to_llava: image tokens after the first turn are removed
    export: str = "llava"                  # a run's outputs: "llava" (the input's format) or "djx"

    @classmethod
    def from_dict(cls, values: dict, where: str = "format_options") -> "LlavaOptions":
        """Options from a mapping; an unknown key or a wrong type is a ValueError naming it."""
        known = {f.name: f for f in fields(cls)}
        for key, value in values.items():
            if key not in known:
                raise ValueError(f"{where}: unknown key {key!r}; known: {', '.join(known)}")
            want = type(getattr(cls, key))
            if type(value) is not want:
                raise ValueError(f"{where}.{key}: expected {want.__name__}, got {value!r}")
        opts = cls(**values)
        if opts.image_broadcast_pos not in ("before", "after", "follow", "random"):
            raise ValueError(f"{where}.image_broadcast_pos: one of before, after, follow, random; "
                             f"got {opts.image_broadcast_pos!r}")
        if opts.image_broadcast and not opts.split_chunk:
            raise ValueError(f"{where}: image_broadcast needs split_chunk: true (as in Data-Juicer)")
        if opts.export not in ("llava", "djx"):
            raise ValueError(f"{where}.export: 'llava' or 'djx', got {opts.export!r}")
        if not opts.sent_separator:
            raise ValueError(f"{where}.sent_separator: '' joins the turns with nothing between them, and reading "
                             f"them back (dj_to_llava) cuts every turn to ''; give a separator such as '\\n' or ' '")
        if not opts.image_token.strip():
            raise ValueError(f"{where}.image_token: LLaVA's image token, e.g. '<image>'; got {opts.image_token!r}")
        return opts


@dataclass(frozen=True)
class Keys:
    """The djx side: its text and image keys and special tokens (the run's RunContext)."""
    text_key: str = "text"
    image_key: str = "images"
    image_token: str = "<__dj__image>"
    eoc_token: str = "<|__dj__eoc|>"


def llava_problem(record) -> str | None:
    """Why `record` is not a LLaVA record (None: it is)."""
    if not isinstance(record, dict):
        return f"not a JSON object (got {type(record).__name__})"
    convs = record.get("conversations", _MISSING)
    if convs is _MISSING:
        return "no 'conversations' key"
    if not isinstance(convs, list) or not convs:
        return f"'conversations' must be a non-empty list of {{from, value}} turns, got {convs!r:.80}"
    for i, turn in enumerate(convs):
        if not (isinstance(turn, dict) and isinstance(turn.get("from"), str) and isinstance(turn.get("value"), str)):
            return f"conversations[{i}] must be an object with string 'from' and 'value', got {turn!r:.80}"
    if len(convs) % 2:
        return f"'conversations' has {len(convs)} turns, not (human, gpt) pairs"
    if not isinstance(record.get("image", ""), str):
        return f"'image' must be one image path (a string), got {record['image']!r:.80}"
    return None


def llava_to_djx(record, opts: LlavaOptions, keys: Keys = Keys()) -> dict:
    """The djx record of a LLaVA record; FormatError says why a record is not one."""
    why = llava_problem(record)
    if why:
        raise FormatError(why)
    record = {k: v for k, v in record.items() if k != LLAVA_KEY}  # djx's own field: never taken from an input
    text, images = _text_and_images(record, opts, keys.eoc_token)
    if keys.image_token != opts.image_token:
        text = text.replace(opts.image_token, keys.image_token)
    out = {k: v for k, v in record.items() if k not in ("image", "conversations")}
    if "id" in record and opts.str_id and record["id"] is not None:  # a null id stays null, not "None"
        out["id"] = str(record["id"])
    out[keys.text_key], out[keys.image_key] = text, images
    try:
        back = djx_to_llava(out, opts, keys)
    except FormatError:
        back = {}
    own = ("id", "image", "conversations", keys.text_key, keys.image_key)  # what the mapping touches
    orig = {k: v for k, v in record.items() if k in own and back.get(k, _MISSING) != v}
    if orig or back.keys() != record.keys():
        out[LLAVA_KEY] = {"text": _fingerprint(text), "orig": orig}
    return out


def lost_without_orig(record: dict, sample: dict, opts: LlavaOptions, keys: Keys = Keys()) -> str | None:
    """What of the LLaVA `record` its djx `sample` cannot give back without `__dj__llava__` (None:
    nothing beyond the whitespace around a turn, which Data-Juicer's tools strip as well)."""
    bare = {k: v for k, v in sample.items() if k != LLAVA_KEY}
    try:
        back = djx_to_llava(bare, opts, keys)
    except FormatError as e:
        return f"its text does not read back as turns ({e})"
    for key, value in record.items():
        if key not in ("id", "conversations") and back.get(key, "" if key == "image" else _MISSING) != value:
            return (f"its key {key!r} is djx's text or image key (--text-key, --image-key name others)"
                    if key in (keys.text_key, keys.image_key) else f"its key {key!r} does not come back")
    turns, again = record["conversations"], back.get("conversations") or []
    if len(again) != len(turns):
        return f"its {len(turns)} turns read back as {len(again)} (a turn holds a role marker such as '[[gpt]]: ')"
    for i, (a, b) in enumerate(zip(turns, again)):
        if set(a) != {"from", "value"}:
            return f"turn {i} has keys besides 'from' and 'value' ({', '.join(sorted(set(a) - {'from', 'value'}))})"
        if a["from"] != b["from"] or a["value"].strip() != b["value"]:
            return f"turn {i} reads back as {b['value']!r:.60} instead of {a['value'].strip()!r:.60}"
    return None


def _text_and_images(record: dict, o: LlavaOptions, eoc: str) -> tuple[str, list]:
    """llava_to_dj.py's text and image list (with LLaVA's image token)."""
    convs, image, tok, sep = record["conversations"], record.get("image", ""), o.image_token, o.sent_separator
    images, first_pos, chunks = [], "", []
    rng = random.Random(str(record.get("id")))
    for i in range(len(convs) // 2):
        human, robot = convs[2 * i], convs[2 * i + 1]
        question, answer = human["value"], robot["value"]
        if image == "":
            pass  # not a multimodal record: its text is kept as it is
        elif i == 0:
            if question.startswith(tok):
                first_pos = "before"
            elif question.endswith(tok):
                first_pos = "after"
            else:
                raise FormatError(f"the first human turn has LLaVA's image token {tok!r} neither at its start nor "
                                  f"at its end (the record has an image)")
            images.append(image)
        elif o.image_broadcast:
            pos = o.image_broadcast_pos
            if pos == "random":
                pos = "before" if rng.random() < 0.5 else "after"
            elif pos == "follow":
                pos = "before" if first_pos == "before" else "after"
            question = tok + sep + question if pos == "before" else question + sep + tok
            images.append(image)
        if o.only_keep_caption:
            chunks.append(tok + sep + answer)
        else:
            chunks.append(f"[[{human['from']}]]: {question}{sep}[[{robot['from']}]]: {answer}")
    text = (f" {eoc}{sep}" if o.split_chunk else sep).join(chunks)
    return text + (f" {eoc}" if o.add_eoc_at_last else ""), images


def djx_to_llava(sample, opts: LlavaOptions, keys: Keys = Keys()) -> dict:
    """The LLaVA record of a djx record; FormatError says why it cannot be one."""
    if not isinstance(sample, dict):
        raise FormatError(f"not a JSON object (got {type(sample).__name__})")
    text, images = sample.get(keys.text_key), sample.get(keys.image_key) or []
    if not isinstance(text, str):
        raise FormatError(f"text key {keys.text_key!r} is missing or not a string")
    if not isinstance(images, list):
        raise FormatError(f"{keys.image_key!r} must be a list of image paths, got {images!r:.80}")
    distinct = list(dict.fromkeys(images))
    if len(distinct) > 1:
        raise FormatError(f"{len(distinct)} distinct images; a LLaVA record has one")
    hidden = sample.get(LLAVA_KEY)
    hidden = hidden if isinstance(hidden, dict) else {}
    orig = hidden.get("orig") if isinstance(hidden.get("orig"), dict) else {}
    out = {}
    if "id" in sample:
        same = "id" in orig and str(orig["id"]) == str(sample["id"])
        out["id"] = orig["id"] if same else sample["id"]
    if distinct:
        out["image"] = distinct[0]
    elif "image" in orig:
        out["image"] = orig["image"]
    if "conversations" in orig and hidden.get("text") == _fingerprint(text):
        out["conversations"] = orig["conversations"]  # the text is as read: the turns as they were
    else:
        text = text.replace(keys.image_token, opts.image_token)
        out["conversations"] = _as_they_were(_conversations(text, opts, keys, orig), text, orig, out, opts, keys)
    skip = {keys.text_key, keys.image_key, LLAVA_KEY, "id", "image", "conversations"}
    out.update((k, v) for k, v in sample.items() if k not in skip)
    out.update((k, v) for k, v in orig.items() if k not in ("id", "image", "conversations"))
    return out


def _as_they_were(turns: list, text: str, orig: dict, record: dict, o: LlavaOptions, keys: Keys) -> list:
    """The turns read from a `text` an op changed, each with its original's keys besides `value`,
    and exactly as read where the op left its text alone, its ends included (compared before
    Data-Juicer's cleaning strips them); as parsed where the turns do not line up with the originals."""
    convs = orig.get("conversations")
    if o.only_keep_caption or not isinstance(convs, list) or not all(isinstance(t, dict) for t in convs):
        return turns
    try:
        was, _ = _text_and_images({"id": record.get("id"), "image": record.get("image", ""),
                                   "conversations": convs}, o, keys.eoc_token)
        before, now = _conversations(was, o, keys, orig, raw=True), _conversations(text, o, keys, orig, raw=True)
    except (FormatError, KeyError, TypeError, AttributeError):
        return turns
    if not len(before) == len(now) == len(turns) == len(convs) or \
            any(t["from"] != b["from"] or t["from"] != c.get("from") for t, b, c in zip(turns, before, convs)):
        return turns
    return [c if n == b else {**c, "value": t["value"]} for t, n, b, c in zip(turns, now, before, convs)]


def _conversations(text: str, o: LlavaOptions, keys: Keys, orig: dict, raw: bool = False) -> list:
    """dj_to_llava.py's turns of a text (with LLaVA's image token); `raw`: each turn's text as it
    stands between the role markers, before the cleaning (not for only_keep_caption)."""
    if o.only_keep_caption:  # dj_to_llava's restore_questions: the question as read, the caption as now
        convs = orig.get("conversations")
        if not isinstance(convs, list) or len(convs) < 2:
            raise FormatError("only_keep_caption: the record's question is unknown (it was not read as LLaVA, "
                              "or converted without `djx convert --round-trip`, which keeps it)")
        return [convs[0], {"from": convs[1]["from"], "value": _clean(text, 1, o, keys.eoc_token)}]
    parts = _ROLE.split(text)
    if parts[0] == "":
        parts = parts[1:]
    if len(parts) == 1:
        raise FormatError("the text holds no turns `[[role]]: ...` (as dataset_format llava writes them); a LLaVA "
                          "record cannot be made of it (a caption alone, converted with only_keep_caption? convert "
                          "it with --round-trip, which keeps the question)")
    if len(parts) % 4:
        raise FormatError(f"the text reads as {len(parts) // 2} turns, not (human, gpt) pairs: a turn's own text "
                          f"holds a role marker such as '[[gpt]]: ', so where one turn ends cannot be told")
    return [{"from": parts[2 * i], "value": parts[2 * i + 1] if raw else _clean(parts[2 * i + 1], i, o, keys.eoc_token)}
            for i in range(len(parts) // 2)]


def _clean(sentence: str, index: int, o: LlavaOptions, eoc: str) -> str:
    """dj_to_llava.py's clean_sentence: a turn's value without separators, eoc and later image tokens."""
    tok, sep = o.image_token, o.sent_separator
    sentence = sentence.strip()
    if sep and sentence.endswith(sep):  # (an empty separator "ends" every text: nothing to cut)
        sentence = sentence[:-len(sep)].strip()
    if sentence.endswith(eoc):
        sentence = sentence[:-len(eoc)].strip()
    if index > 0 and o.keep_only_first_image:
        if sentence.startswith(tok):
            sentence = sentence[len(tok):].strip()
            if sentence.startswith(sep):
                sentence = sentence[len(sep):].strip()
        if sentence.endswith(tok):
            sentence = sentence[:-len(tok)].strip()
            if sentence.endswith(sep):
                sentence = sentence[:-len(sep)].strip()
    return sentence


def _fingerprint(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]
