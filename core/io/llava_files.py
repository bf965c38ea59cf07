"""`djx convert llava-to-djx | djx-to-llava IN OUT`: a whole dataset from one format to the other,
streamed: a JSON array (LLaVA ships one, e.g. blip_laion_cc_sbu_558k.json) is decoded one record
at a time by djx's reader (memory: the largest record, never the file), JSON Lines line by line.

OUT's suffix picks its layout: `.json`, one JSON array (LLaVA's), or `.jsonl`. A record that is not
in the input's format goes to `<OUT stem>.rejected.jsonl` with its reason (the command then exits 1);
nothing is dropped silently. Both are written under fresh temporary names (never a fixed name
someone could plant a link at) and renamed into place when complete.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass

from djx.core.errors import DjxError
from djx.core.io.dataset import dataset_files, dataset_root
from djx.core.io.guards import check_writable, refuse_inputs_as_outputs
from djx.core.io.llava_image_paths import originals, under, written
from djx.core.io.llava import (LLAVA_KEY, FormatError, Keys, LlavaOptions, djx_to_llava, llava_to_djx,
                               lost_without_orig)
from djx.core.io.llava_seal import drop_foreign_llava, seal_llava
from djx.core.io.private_files import new_file_beside
from djx.core.io.user_key import user_key
from djx.core.io.readers import ReadState, read_files
from djx.core.recipe.context import POSITION_KEY
from djx.core.records import Rejection
from djx.core.run.provenance import PROVENANCE_KEY

DIRECTIONS = ("llava-to-djx", "djx-to-llava")


class _Writer:
    """Records to a .json array or a .jsonl file, one at a time."""

    def __init__(self, fd: int, array: bool):
        self.array = array
        self.f = os.fdopen(fd, "w", encoding="utf-8")
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


class _Lossy(FormatError):
    """A LLaVA record whose djx record, as written, would not give it back."""


@dataclass
class Converted:
    """What a conversion wrote: records, rejects, and records whose text holds more image tokens than
    images (only_keep_caption puts one before every caption, as Data-Juicer does)."""
    written: int = 0
    rejected: int = 0
    extra_image_tokens: int = 0
    relative_images: int = 0   # llava-to-djx without --image-folder: paths relative to LLaVA's image folder
    foreign_llava: int = 0     # djx-to-llava: records whose __dj__llava__ djx did not sign (dropped)
    unsigned_llava: int = 0    # llava-to-djx: __dj__llava__ fields written unsigned (no usable key)
    key_problem: str = ""      # why the user's key is unusable, if it is
    missing_images: int = 0    # llava-to-djx: image paths (with --image-folder, or absolute) naming no file
    remote_images: int = 0     # URLs and data: URIs: written as they are, never joined to a folder
    outside_images: int = 0    # llava-to-djx: paths that climb out of --image-folder (../)
    first_outside: str = ""
    first_missing: str = ""


@dataclass(frozen=True)
class _Paths:
    """Where one conversion reads image paths from and writes them to."""
    image_folder: str | None   # absolute
    absolute: bool             # --image-folder was given absolute: write absolute paths
    out_dir: str               # relative paths written resolve from here (djx process reads them so)
    in_root: str               # the input's folder: its relative paths resolve from here


def convert(src: str, dst: str, direction: str, opts: LlavaOptions = LlavaOptions(), keys: Keys = Keys(),
            image_folder: str | None = None, round_trip: bool = False) -> Converted:
    """Convert the dataset `src` (a file, folder or glob) into `dst`. `round_trip`: llava-to-djx keeps,
    beside each record that needs it, what gives the LLaVA record back byte for byte (`__dj__llava__`);
    without it a record whose text cannot say its turns again is rejected, never changed silently."""
    if direction not in DIRECTIONS:
        raise DjxError(f"convert: {direction!r} is not one of {', '.join(DIRECTIONS)}")
    if not dst.lower().endswith((".json", ".jsonl")):
        raise DjxError(f"convert: the output's suffix picks its layout: .json (an array) or .jsonl, got {dst!r}")
    files = dataset_files(src)
    if any(f.lower().endswith(".parquet") for f in files):
        raise DjxError(f"convert: {src}: reads .json and .jsonl files")
    if image_folder is not None and not os.path.isdir(image_folder):
        raise DjxError(f"--image-folder: no such folder: {image_folder}")
    dst = os.path.abspath(dst)
    stem = dst[:-len(".jsonl")] if dst.lower().endswith(".jsonl") else dst[:-len(".json")]
    rejected_path = stem + ".rejected.jsonl"
    refuse_inputs_as_outputs(files, {"output": dst, "rejects": rejected_path},
                             "convert", "write the output under another name (or in another folder)")
    check_writable(os.path.dirname(dst), "convert")
    paths = _Paths(image_folder and os.path.abspath(image_folder), bool(image_folder and os.path.isabs(image_folder)),
                   os.path.dirname(dst), dataset_root(src))
    try:
        done, part, rejected_part = _convert_files(files, dst, rejected_path, dst.lower().endswith(".json"),
                                                   direction, opts, keys, paths, round_trip)
    except OSError as e:
        raise DjxError(f"convert: cannot write {dst}: {e.strerror or e}; nothing was written (free space or "
                       f"choose another folder)") from None
    os.replace(part, dst)
    if rejected_part is not None:
        os.replace(rejected_part, rejected_path)
    elif os.path.lexists(rejected_path):
        os.unlink(rejected_path)  # an earlier conversion's rejects: not this one's
    return done


def _convert_files(files: list[str], dst: str, rejected_path: str, array: bool, direction: str,
                   opts: LlavaOptions, keys: Keys, paths: _Paths, round_trip: bool) -> tuple:
    """The conversion into new temporary files beside `dst` and `rejected_path` (fresh random
    names: never one someone could plant a link at); (what it wrote, the output's temporary file,
    the rejects' or None). On any failure (a full disk, Ctrl-C) none is left."""
    done, out, rejected, part, rejected_part = Converted(), None, None, None, None
    owner = user_key()
    key, done.key_problem = owner.key, owner.problem
    try:
        fd, part = new_file_beside(dst)
        out = _Writer(fd, array)
        for item in read_files(files, ReadState(), parse=True):
            try:
                if item.error:
                    raise FormatError(item.error)
                if direction == "djx-to-llava" and isinstance(item.record, dict):
                    done.foreign_llava += drop_foreign_llava(item.record, key)  # never an image or turn from it
                record = _one(item.record, direction, opts, keys, paths, round_trip, done)
                if direction == "llava-to-djx" and LLAVA_KEY in record:
                    seal_llava(record, key)  # the field djx makes is signed with this user's key
                    done.unsigned_llava += not key
            except FormatError as e:
                if rejected is None:
                    fd, rejected_part = new_file_beside(rejected_path)
                    rejected = os.fdopen(fd, "w", encoding="utf-8")
                expected = "LLaVA" if direction == "llava-to-djx" else "djx"
                reason, code = ((str(e), "lossy_conversion") if isinstance(e, _Lossy)
                                else (f"not a {expected} record: {e}", "bad_input"))
                rej = Rejection(item.pos, item.line, None, None, reason, code,
                                record=item.record, raw=item.raw if item.error else None, file=item.file)
                rejected.write(json.dumps(rej.to_record(tuple(files)), ensure_ascii=False) + "\n")
                done.rejected += 1
                continue
            out.write(record)
        done.written = out.n
        out.close()
        if rejected is not None:
            rejected.close()
    except BaseException:
        for handle, name in ((out and out.f, part), (rejected, rejected_part)):
            try:
                if handle is not None:
                    handle.close()
            except OSError:
                pass  # the disk that failed the write may fail the flush too
            if name is not None and os.path.exists(name):
                os.unlink(name)
        raise
    return done, part, rejected_part


def _one(record, direction: str, opts: LlavaOptions, keys: Keys, paths: _Paths, round_trip: bool,
         done: Converted) -> dict:
    if direction == "llava-to-djx":
        out = llava_to_djx(record, opts, keys)
        if not round_trip:
            lost = None if opts.only_keep_caption else lost_without_orig(record, out, opts, keys)
            if lost:
                raise _Lossy(f"not converted: {lost}, so its djx record would not give it back; --round-trip "
                             f"keeps what does beside it")
            out.pop(LLAVA_KEY, None)
        if out[keys.text_key].count(keys.image_token) > len(out[keys.image_key]):
            done.extra_image_tokens += 1
        as_read, out[keys.image_key] = out[keys.image_key], [written(p, paths, done) for p in out[keys.image_key]]
        kept = originals(as_read, paths) if round_trip else None
        if kept:  # paths djx-to-llava would not give back as they were: kept beside, signed
            out[LLAVA_KEY] = {**out.get(LLAVA_KEY, {}), "paths": kept}
        return out
    if isinstance(record, dict):  # a djx export's run bookkeeping (its positions, its stats' signatures)
        record = {k: v for k, v in record.items() if k not in (POSITION_KEY, PROVENANCE_KEY)}
    if paths.image_folder is not None and isinstance(record, dict) and isinstance(record.get(keys.image_key), list):
        record = {**record, keys.image_key: [under(p, paths, record.get(LLAVA_KEY)) for p in record[keys.image_key]]}
    return djx_to_llava(record, opts, keys)


def add_convert_parser(sub) -> None:
    """`djx convert DIRECTION IN OUT`."""
    p = sub.add_parser("convert", help="convert a dataset between LLaVA's format and djx's (streamed)")
    p.add_argument("direction", choices=DIRECTIONS)
    p.add_argument("input", help="a .json array or .jsonl file (or a folder or glob of them)")
    p.add_argument("output", help="a .json (one array) or .jsonl file")
    p.add_argument("--image-folder", help="llava-to-djx: image paths are joined to this folder (LLaVA's "
                   "--image_folder) and written absolute if it is given absolute, else relative to the output's "
                   "folder (where djx process resolves them); djx-to-llava: paths under it are written relative to it")
    p.add_argument("--round-trip", action="store_true", help="llava-to-djx: keep beside a record what gives it "
                   "back byte for byte (`__dj__llava__`: e.g. the questions under only_keep_caption)")
    p.add_argument("--image-special-token", default=Keys.image_token, help="djx's image token in the text")
    p.add_argument("--eoc-special-token", default=Keys.eoc_token, help="djx's end-of-chunk token")
    p.add_argument("--text-key", default=Keys.text_key)
    p.add_argument("--image-key", default=Keys.image_key)
    p.add_argument("--option", action="append", metavar="KEY=VALUE", default=[],
                   help="a conversion option as Data-Juicer's tools name it (YAML value), e.g. only_keep_caption=true, "
                        "split_chunk=true, str_id=false, image_token='<image>'")
    p.set_defaults(fn=_convert_cmd)


def _convert_cmd(args) -> int:
    from djx.core.recipe.overrides import _yaml_value
    values = {}
    for item in args.option:
        key, eq, value = item.partition("=")
        if not eq:
            raise DjxError(f"--option expects KEY=VALUE, got {item!r}")
        values[key.strip()] = _yaml_value(value, f"--option {item}", key.strip(), "--option")
    try:
        opts = LlavaOptions.from_dict(values, where="--option")
    except ValueError as e:
        raise DjxError(str(e)) from None
    keys = Keys(args.text_key, args.image_key, args.image_special_token, args.eoc_special_token)
    if args.round_trip and args.direction != "llava-to-djx":
        raise DjxError("--round-trip is for llava-to-djx (djx-to-llava uses what it kept)")
    done = convert(args.input, args.output, args.direction, opts, keys, args.image_folder, args.round_trip)
    print(f"djx convert: {done.written} records written to {args.output}")
    if done.foreign_llava:
        print(f"djx convert: {done.foreign_llava} record(s) carried a {LLAVA_KEY} field djx did not sign: dropped, "
              f"so no image, turn or key was taken from it")
    if done.unsigned_llava:
        print(f"djx convert: warning: {done.unsigned_llava} record(s) have a {LLAVA_KEY} field that could not be "
              f"signed (djx will drop those fields when it reads this file): {done.key_problem}")
    if done.extra_image_tokens:
        print(f"djx convert: warning: {done.extra_image_tokens} records have more image tokens "
              f"({keys.image_token}) in their text than images"
              + (" (only_keep_caption puts one before each caption, as Data-Juicer does)" if opts.only_keep_caption
                 else "") + "; the image-text filters (image_text_similarity_filter, image_text_matching_filter, "
                 "phrase_grounding_recall_filter) reject such samples: keep one turn per record, or use "
                 "--option image_broadcast=true --option split_chunk=true")
    if done.missing_images:
        print(f"djx convert: warning: {done.missing_images} image path(s) name no file (the first: "
              f"{done.first_missing}); djx process rejects their samples as bad_image: check --image-folder")
    if done.remote_images:
        print(f"djx convert: note: {done.remote_images} image reference(s) are URLs or data: URIs, written as they "
              f"are; djx process rejects their samples as bad_image (it reads local files: download them first)")
    if done.outside_images:
        print(f"djx convert: warning: {done.outside_images} image path(s) lead outside --image-folder (the first: "
              f"{done.first_outside}); LLaVA joins them to its folder all the same: check they are meant")
    if done.relative_images:
        print(f"djx convert: note: {done.relative_images} image paths are relative to LLaVA's image folder; "
              f"djx process reads them from the output's folder: give --image-folder, or image_root in the recipe")
    if done.rejected:
        stem = args.output.rsplit(".", 1)[0]
        print(f"djx convert: {done.rejected} records rejected, each with its reason: {stem}.rejected.jsonl")
        return 1
    return 0
