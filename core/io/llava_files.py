"""`djx convert llava-to-djx | djx-to-llava IN OUT`: a whole dataset from one format to the other,
streamed: a JSON array (LLaVA ships one, e.g. blip_laion_cc_sbu_558k.json) is decoded one record
at a time by djx's reader (memory: the largest record, never the file), JSON Lines line by line.

OUT's suffix picks its layout: `.json`, one JSON array (LLaVA's), or `.jsonl`. A record that is not
in the input's format goes to `<OUT stem>.rejected.jsonl` with its reason (the command then exits 1);
nothing is dropped silently. The output is written under a temporary name and renamed when complete.
"""
from __future__ import annotations

import json
import os

from djx.core.errors import DjxError
from djx.core.io.dataset import dataset_files
from djx.core.io.llava import FormatError, Keys, LlavaOptions, djx_to_llava, llava_to_djx
from djx.core.io.readers import ReadState, read_files
from djx.core.records import Rejection

DIRECTIONS = ("llava-to-djx", "djx-to-llava")


class _Writer:
    """Records to a .json array or a .jsonl file, one at a time."""

    def __init__(self, path: str, array: bool):
        self.array = array
        self.f = open(path, "w", encoding="utf-8")
        self.n = 0
        if self.array:
            self.f.write("[")

    def write(self, record: dict) -> None:
        text = json.dumps(record, ensure_ascii=False)
        self.f.write(((",\n" if self.n else "\n") + text) if self.array else text + "\n")
        self.n += 1

    def close(self) -> None:
        if self.array:
            self.f.write("\n]\n")
        self.f.close()


def convert(src: str, dst: str, direction: str, opts: LlavaOptions = LlavaOptions(), keys: Keys = Keys(),
            image_folder: str | None = None) -> tuple[int, int]:
    """Convert the dataset `src` (a file, folder or glob) into `dst`; (records written, rejected)."""
    if direction not in DIRECTIONS:
        raise DjxError(f"convert: {direction!r} is not one of {', '.join(DIRECTIONS)}")
    if not dst.lower().endswith((".json", ".jsonl")):
        raise DjxError(f"convert: the output's suffix picks its layout: .json (an array) or .jsonl, got {dst!r}")
    files = dataset_files(src)
    if any(f.lower().endswith(".parquet") for f in files):
        raise DjxError(f"convert: {src}: reads .json and .jsonl files")
    if image_folder is not None and not os.path.isdir(image_folder):
        raise DjxError(f"--image-folder: no such folder: {image_folder}")
    stem = dst[:-len(".jsonl")] if dst.lower().endswith(".jsonl") else dst[:-len(".json")]
    part, rejected_path = dst + ".part", stem + ".rejected.jsonl"
    out, rejected, n_rejected = _Writer(part, dst.lower().endswith(".json")), None, 0
    try:
        for item in read_files(files, ReadState(), parse=True):
            try:
                if item.error:
                    raise FormatError(item.error)
                record = _one(item.record, direction, opts, keys, image_folder)
            except FormatError as e:
                if rejected is None:
                    rejected = open(rejected_path, "w", encoding="utf-8")
                expected = "LLaVA" if direction == "llava-to-djx" else "djx"
                rej = Rejection(item.pos, item.line, None, None, f"not a {expected} record: {e}", "bad_input",
                                record=item.record, raw=item.raw if item.error else None, file=item.file)
                rejected.write(json.dumps(rej.to_record(tuple(files)), ensure_ascii=False) + "\n")
                n_rejected += 1
                continue
            out.write(record)
    except BaseException:
        out.close()
        os.unlink(part)
        raise
    finally:
        if rejected is not None:
            rejected.close()
    out.close()
    os.replace(part, dst)
    if not n_rejected and os.path.exists(rejected_path):
        os.unlink(rejected_path)  # an earlier conversion's rejects: not this one's
    return out.n, n_rejected


def _one(record, direction: str, opts: LlavaOptions, keys: Keys, image_folder: str | None) -> dict:
    if direction == "llava-to-djx":
        out = llava_to_djx(record, opts, keys)
        if image_folder is not None:
            out[keys.image_key] = [os.path.normpath(os.path.join(image_folder, p)) for p in out[keys.image_key]]
        return out
    if image_folder is not None and isinstance(record, dict) and isinstance(record.get(keys.image_key), list):
        root = os.path.abspath(image_folder)
        record = {**record, keys.image_key: [_under(p, root) for p in record[keys.image_key]]}
    return djx_to_llava(record, opts, keys)


def _under(path, root: str):
    """`path` relative to `root` when it lies under it (LLaVA joins its image folder and the path)."""
    if not isinstance(path, str) or not os.path.isabs(path):
        return path
    rel = os.path.relpath(path, root)
    return path if rel.startswith(os.pardir) else rel


def add_convert_parser(sub) -> None:
    """`djx convert DIRECTION IN OUT`."""
    p = sub.add_parser("convert", help="convert a dataset between LLaVA's format and djx's (streamed)")
    p.add_argument("direction", choices=DIRECTIONS)
    p.add_argument("input", help="a .json array or .jsonl file (or a folder or glob of them)")
    p.add_argument("output", help="a .json (one array) or .jsonl file")
    p.add_argument("--image-folder", help="llava-to-djx: image paths are joined to this folder (LLaVA's "
                   "--image_folder); djx-to-llava: paths under it are written relative to it")
    p.add_argument("--image-special-token", default=Keys.image_token, help="djx's image token in the text")
    p.add_argument("--eoc-special-token", default=Keys.eoc_token, help="djx's end-of-chunk token")
    p.add_argument("--text-key", default=Keys.text_key)
    p.add_argument("--image-key", default=Keys.image_key)
    p.add_argument("--option", action="append", metavar="KEY=VALUE", default=[],
                   help="a conversion option as Data-Juicer's tools name it (YAML value), e.g. only_keep_caption=true, "
                        "split_chunk=true, str_id=false, image_token='<image>'")
    p.set_defaults(fn=_convert_cmd)


def _convert_cmd(args) -> int:
    import yaml
    values = {}
    for item in args.option:
        key, eq, value = item.partition("=")
        if not eq:
            raise DjxError(f"--option expects KEY=VALUE, got {item!r}")
        values[key.strip()] = yaml.safe_load(value) if value.strip() else ""
    try:
        opts = LlavaOptions.from_dict(values, where="--option")
    except ValueError as e:
        raise DjxError(str(e)) from None
    keys = Keys(args.text_key, args.image_key, args.image_special_token, args.eoc_special_token)
    written, rejected = convert(args.input, args.output, args.direction, opts, keys, args.image_folder)
    print(f"djx convert: {written} records written to {args.output}")
    if rejected:
        stem = args.output.rsplit(".", 1)[0]
        print(f"djx convert: {rejected} records rejected, each with its reason: {stem}.rejected.jsonl")
        return 1
    return 0
