"""Shared machinery of the image-text model filters (CLIP similarity, BLIP matching).

Text is split into chunks by the eoc token; the k-th image token pairs with the k-th image; each
chunk that holds images gets one score, the reduce (avg/max/min) of its images' scores with the
chunk's text (special tokens removed). All pairs of a batch are scored together: each distinct
image and text is encoded once, in forwards of `forward_batch_size`, with OOM back-off.
A sample whose image count disagrees with its image-token count is rejected with a reason that
names the token in use: that is the symptom of a wrong `image_special_token`, never empty stats.
"""
from __future__ import annotations

from typing import Literal

from PIL import ImageOps

from djx import Batch, RangeFilter, RecipeError, SampleError
from djx.core.models.oom import OOM_REASON, forward_with_backoff, free_cache, is_oom
from djx.core.run.breakdown import forward_timed, timed
from djx.core.recipe.context import TOKEN_MISMATCH
from djx.ops.common.model_op import OneModelOp, check_forward_batch
from djx.ops.common import device_decode
from djx.ops.common.pixels import PixelRows, to_model, value_table
from djx.ops.common.prepared import PreparedPairs, join, row_pieces, split
from djx.ops.common.shapes import attention_without_plans, pad_tokens, text_length
from djx.ops.models import load_host_side


def split_chunks(text: str, n_images: int, image_token: str, eoc_token: str) -> list[tuple[str, int, int]]:
    """[(chunk text without special tokens, first image index, image count)] for chunks with images.

    Raises SampleError when the text's image tokens do not match the sample's images."""
    n_tokens = text.count(image_token)
    if n_tokens != n_images:
        raise SampleError(f"{n_images} image(s) but {n_tokens} image token(s) {image_token!r} in the "
                          f"text; check image_special_token (this run uses {image_token!r})", TOKEN_MISMATCH)
    chunks, offset = [], 0
    for chunk in text.split(eoc_token):
        count = chunk.count(image_token)
        if count:
            clean = chunk.replace(image_token, "").replace(eoc_token, "").strip()
            chunks.append((clean, offset, count))
            offset += count
    return chunks


# Items per model forward when a recipe does not say. On a CPU a forward of 8 is as fast per item
# as one of 32 (CLIP ViT-B/32, one thread: 18.98 vs 18.70 s for 128 pairs, three runs each) and
# holds a quarter of the activations (peak +35 MB against +175 MB over the loaded model, per
# worker). A GPU needs the larger forwards to be busy: CLIP B/32 in bf16 on an H100 did 12,457
# pairs/s in forwards of 256; the device's scorer joins batches up to 512 pairs to fill them (OOM
# halves a forward).
CPU_FORWARD_BATCH, GPU_FORWARD_BATCH = 8, 256


def default_forward_batch(device: str) -> int:
    return CPU_FORWARD_BATCH if device == "cpu" else GPU_FORWARD_BATCH


class ImageTextModelFilter(OneModelOp, RangeFilter):
    """Base of the filters that score (chunk text, image) pairs with a model."""

    uses_images = True

    def __init__(self, min_score: float, max_score: float = 1.0,
                 trust_remote_code: bool = False, horizontal_flip: bool = False,
                 vertical_flip: bool = False, any_or_all: Literal["any", "all"] = "any",
                 reduce_mode: Literal["avg", "max", "min"] = "avg",
                 dtype: Literal["float32", "bfloat16", "float16", "auto"] = "float32",
                 forward_batch_size: int | None = None, draft_decode: bool = False,
                 image_decode: Literal["cpu", "device"] = "cpu", **common):
        super().__init__(**common)
        check_forward_batch(self.name, forward_batch_size)
        problem = device_decode.problem() if image_decode == "device" else None
        if problem:
            raise RecipeError(f"{self.name}: {problem}")
        self.image_decode = image_decode
        self.dtype, self.trust_remote_code = dtype, trust_remote_code
        self.min_score, self.max_score = min_score, max_score
        self.horizontal_flip, self.vertical_flip = horizontal_flip, vertical_flip
        self.any_or_all, self.reduce_mode = any_or_all, reduce_mode
        self.forward_batch_size = forward_batch_size
        self.draft_decode = draft_decode

    @property
    def stat_shapes(self) -> dict[str, str]:
        return {self.stat: "per_chunk"}  # one score per chunk that holds images

    @property
    def stat(self) -> str:
        return self.stats_keys[0]

    # -- for subclasses ---------------------------------------------------------------------
    def forward(self, fn, items: list, loaded, fault=(), counters: dict | None = None) -> list:
        """`fn` over `items` in `forward_batch_size` chunks, halved on CUDA OOM; one output per
        item (None where even a single item ran out of memory)."""
        size = self.forward_batch_size or default_forward_batch(loaded.device)
        with attention_without_plans(loaded.device):  # no attention plan built per shape (shapes.py)
            return forward_with_backoff(fn, items, size, loaded.device, fault, counters)

    @staticmethod
    def pixel_rows(loaded, prepared: PreparedPairs, rows: list[int], counters: dict | None = None):
        """The prepared pixel rows `rows` (consecutive), on the model's device and dtype (uint8
        rows rescaled and normalised there, as the processor does; JPEG bytes decoded there first);
        the time it takes is the transfer's in `counters`."""
        import torch
        with timed(counters, "transfer"):
            if prepared.jpegs:  # counted in the transfer, and apart as its part
                with timed(counters, "device_decode"):
                    device_decode.decode(prepared, loaded.processor.image_processor, loaded.device)
            # each joined batch's rows go to the device straight from where they lie (the worker's
            # shared buffer), then are put together there
            pieces = [p.to(loaded.device, non_blocking=True)
                      for p in row_pieces(prepared.pixels, rows[0], rows[-1] + 1)]
            return to_model(pieces[0] if len(pieces) == 1 else torch.cat(pieces), prepared.pixel_table,
                            loaded.device, loaded.dtype)

    @staticmethod
    def token_rows(loaded, prepared: PreparedPairs, rows: list[int], counters: dict | None = None) -> dict:
        """input_ids and attention_mask of the texts `rows`, padded as the tokenizer pads a list."""
        texts = [prepared.tokens[t] for t in rows]
        with timed(counters, "transfer"):  # on a GPU to a length met before (shapes.py)
            length = text_length(max(map(len, texts), default=0), lambda: max_text_len(loaded.model), loaded.device)
            padded = pad_tokens(loaded.processor.tokenizer, texts, length)
            return {k: padded[k].to(loaded.device) for k in ("input_ids", "attention_mask")}

    def score(self, loaded, prepared: PreparedPairs, fault=(), counters: dict | None = None) -> list:
        """Scores of the prepared pairs, from the prepared tensors alone; None where a forward
        failed even alone."""
        raise NotImplementedError

    def host_side(self, pool) -> tuple:
        """(processor, text length) of the model, without its weights: what preparing needs."""
        return pool.host(("prepare", self.spec), lambda: load_host_side(self.spec))

    def score_parts(self, loaded, parts: list[PreparedPairs], fault=(), counters: dict | None = None) -> list:
        """Several batches' prepared pairs scored together; their scores, batch by batch. The
        scorer hands the parts already joined where it could (`parts.assembled`)."""
        joined = getattr(parts, "assembled", None) or self.assemble_parts(parts)
        return split(self.score(loaded, joined, fault, counters), parts)

    def assemble_parts(self, parts: list[PreparedPairs]) -> PreparedPairs:
        """Several batches' prepared pairs as one (the scorer does this while the forwards before run)."""
        return join(parts)

    def warm_device(self, loaded) -> None:
        """The scorer's warm-up: torchvision's decoders imported before the first batch."""
        if self.image_decode == "device":
            device_decode.require(loaded.device)

    @staticmethod
    def ready_parts(loaded, joined: PreparedPairs, counters: dict | None = None) -> None:
        """The joined JPEGs decoded on the model's device, by the scorer's gathering thread while
        the forwards before run (on its own CUDA stream; finished here, so the forwards read them
        ready); pixel_rows then finds nothing left to decode."""
        if not joined.jpegs:
            return
        try:
            with timed(counters, "device_decode"):
                device_decode.decode(joined, loaded.processor.image_processor, loaded.device)
                device_decode.settle(loaded.device)
        except Exception as e:  # noqa: BLE001  (out of memory: left to pixel_rows, inside the forwards' back-off)
            if not is_oom(e):
                raise
            free_cache(loaded.device)

    # -- the filter: prepare (host), score (model), finish (batch) -------------------------------
    def prepare(self, batch: Batch, processor, text_len: int) -> tuple[PreparedPairs, list]:
        """Chunk the texts, decode each distinct image once, run the processor and the tokenizer
        (truncating at `text_len`, the model's text length). Returns the prepared pairs and, per
        sample, its chunks' pair indices (None: rejected)."""
        ctx = batch.ctx
        target = _image_side(processor) if self.draft_decode else 0
        geo = self._device_geometry(processor.image_processor)
        texts, text_ids, images, image_ids = [], {}, [], {}
        plan, pairs, rows = [], [], PixelRows(processor.image_processor, batch.images.release)
        for i, sample in enumerate(batch.samples):
            refs = batch.image_refs(sample)
            try:
                chunks = split_chunks(batch.text(sample), len(refs), ctx.image_special_token,
                                      ctx.eoc_special_token)
                for ref in refs:
                    if ref not in image_ids:  # decoded first: an image that fails is never given an index
                        with timed(batch.counters, "decode"):
                            image = device_decode.read_jpeg(batch.images, ref) if geo else None
                            image = image if image is not None else self._flip(batch.images.rgb(ref, target))
                        image_ids[ref] = len(images)
                        if not isinstance(image, device_decode.JpegFile):  # pixels made a group at a time,
                            with timed(batch.counters, "preprocess"):  # then the image goes (a flip's copy too)
                                image = rows.add(ref, image)
                        images.append(image)
            except SampleError as e:
                batch.reject(i, str(e), e.code)
                plan.append(None)
                continue
            sample_chunks = SampleChunks()
            sample_chunks.images = [image_ids[ref] for ref in dict.fromkeys(refs)]  # its distinct image rows
            for text, first, count in chunks:
                t = text_ids.setdefault(text, len(texts))
                if t == len(texts):
                    texts.append(text)
                sample_chunks.append(list(range(len(pairs), len(pairs) + count)))
                pairs.extend((t, image_ids[ref]) for ref in refs[first:first + count])
            plan.append(sample_chunks)
        with timed(batch.counters, "preprocess"):
            tokens = processor.tokenizer(texts, truncation=True, max_length=text_len)["input_ids"] if texts else []
            return self._with_pixels(PreparedPairs(None, tokens, pairs), processor.image_processor, images, geo,
                                     rows), plan

    def _with_pixels(self, prepared: PreparedPairs, image_processor, images: list, geo, rows) -> PreparedPairs:
        """`prepared` with the images' pixels (uint8 and their table where the processor allows it)
        and, with `image_decode: device`, the JPEG files' bytes in their rows."""
        import torch
        prepared.pixels, prepared.pixel_table = rows.pixels()
        if any(im is not None for im in images):  # JPEG files the device decodes
            prepared.pixel_table = value_table(image_processor)
            prepared.jpeg_rows = [i for i, im in enumerate(images) if isinstance(im, device_decode.JpegFile)]
            prepared.jpegs = [torch.frombuffer(bytearray(images[i].data), dtype=torch.uint8) for i in prepared.jpeg_rows]
            prepared.jpeg_orientations = [images[i].orientation for i in prepared.jpeg_rows]
            prepared.geometry = geo
        return prepared

    def _device_geometry(self, image_processor) -> dict | None:
        """With `image_decode: device`, the processor's geometry (and the op's flips) where the
        device can follow it and the processor's pixels are uint8 before normalisation."""
        if self.image_decode != "device" or value_table(image_processor) is None:
            return None
        geo = device_decode.geometry(image_processor)
        return None if geo is None else dict(geo, hflip=self.horizontal_flip, vflip=self.vertical_flip)

    def finish(self, batch: Batch, plan: list, scores: list) -> None:
        """Each sample's chunk scores, reduced per chunk, as its stat (an OOM even alone rejects it)."""
        for i, sample_chunks in enumerate(plan):
            if sample_chunks is None:
                continue
            values = []
            for idx in sample_chunks:
                chunk_scores = [scores[p] for p in idx]
                if any(s is None for s in chunk_scores):
                    batch.reject(i, OOM_REASON, "oom")
                    break
                values.append(_reduce(chunk_scores, self.reduce_mode))
            else:
                batch.stats(batch.samples[i])[self.stat] = values

    def compute_stats(self, batch: Batch) -> None:
        scorer = batch.pool.scorer() if hasattr(batch.pool, "scorer") else None
        if scorer is None:  # the model is here
            loaded = batch.pool.get(self.spec)
            processor, text_len = loaded.processor, max_text_len(loaded.model)
        else:  # scoring: device: prepare here, the device's scorer scores
            processor, text_len = self.host_side(batch.pool)
        prepared, plan = self.prepare(batch, processor, text_len)
        scores = []
        if prepared.pairs and scorer is not None:
            with timed(batch.counters, "wait"):  # its forwards come back in the scorer's counters
                scores = scorer.score(self, prepared, batch.ctx.fault, batch.counters)
        elif prepared.pairs:
            import torch
            with torch.inference_mode():
                scores = forward_timed(lambda: self.score(loaded, prepared, batch.ctx.fault, batch.counters),
                                       batch.counters)
        self.finish(batch, plan, scores)

    def keep(self, stats: dict) -> bool:
        return self.keep_values(stats[self.stat], self.min_score, self.max_score, self.any_or_all)

    def drop_reason(self, stats: dict) -> str:
        return self.range_reason(self.stat, stats[self.stat], self.min_score, self.max_score, "min_score", "max_score",
                            self.any_or_all)

    def _flip(self, image):
        if self.horizontal_flip:
            image = ImageOps.mirror(image)
        if self.vertical_flip:
            image = ImageOps.flip(image)
        return image


class SampleChunks(list):
    """One sample's chunks (each the indices of its pairs) and `images`, its distinct image rows."""
    images: list = []


def _reduce(values: list[float], mode: str) -> float:
    if mode == "max":
        return max(values)
    if mode == "min":
        return min(values)
    return sum(values) / len(values)


def _image_side(processor) -> int:
    size = getattr(getattr(processor, "image_processor", None), "size", None) or {}
    if isinstance(size, dict):
        return int(size.get("shortest_edge") or size.get("height") or 0)
    return int(getattr(size, "shortest_edge", 0) or getattr(size, "height", 0) or 0)


def max_text_len(model) -> int:
    return int(model.config.text_config.max_position_embeddings)
