"""RunContext: the run's configuration, frozen and passed by value to every worker and op.

Special tokens live here and nowhere else: a value stored on a module or class is lost in spawn
workers, which is how stats silently came out empty elsewhere.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from djx.core.io.llava import LlavaOptions

STATS_KEY = "__dj__stats__"
POSITION_KEY = "__dj__pos__"
ORIGIN_POS_KEY = "__dj__orig_pos__"  # a sample read from a djx output: its position in the first run's input
DROP_KEY = "__dj__drop__"
SUFFIX_KEY = "__dj__suffix__"  # a record's file suffix, as Data-Juicer's reader fills it for suffix_filter
TOKEN_MISMATCH = "image_token_mismatch"  # rejection code: image count != image-token count


@dataclass(frozen=True)
class RunContext:
    text_key: str = "text"
    image_key: str = "images"
    image_special_token: str = "<__dj__image>"
    eoc_special_token: str = "<|__dj__eoc|>"
    dataset_dir: str = "."  # relative image paths resolve against it
    max_image_pixels: int = 178_956_970  # decompression-bomb guard (PIL's default x 2)
    load_truncated_images: bool = False  # True: keep what a truncated image decodes to (Data-Juicer)
    max_decoded_bytes: int = 4 << 30  # decoded pixels one batch may hold in a worker (core/op/images.py)
    on_error: str = "reject"  # or "fail"
    fault: tuple[str, ...] = field(default=())  # injected faults (recipe inject_faults), e.g. ("oom_above:2",)
    input_files: tuple[str, ...] = ()  # a dataset of several files: their names (Item.file indexes)
    export_dir: str | None = None  # set for a run that writes files: image paths are rewritten for it
    image_paths: str = "absolute"  # how image paths are written: "absolute" or "relative" (to export_dir)
    recompute_stats: bool = False  # False: a filter reuses valid stats a sample already carries
    trust_input_stats: bool = False  # True: reuse stats djx cannot vouch for (a Data-Juicer export)
    stats_key: bytes = field(default=b"", repr=False)  # signs the stats djx writes (run/provenance.py)
    llava: LlavaOptions | None = None  # dataset_format: llava (None: djx's own format)
    # a recipe with a suffix_filter: each input file's suffix (by Item.file), a record's __dj__suffix__
    # where it has none, as Data-Juicer's reader fills it then
    file_suffixes: tuple[str, ...] = ()

    def with_(self, **changes) -> "RunContext":
        return replace(self, **changes)
