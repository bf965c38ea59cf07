"""phrase_grounding_recall_filter: how many of a text's noun phrases OWL-ViT locates in its images
(Data-Juicer's op).

Per chunk of the text that holds images (the k-th image token pairs with the k-th image): the
chunk's noun phrases (special tokens removed; see djx.ops.common.grounding) are OWL-ViT's text
queries for each of the chunk's images; an image's recall is the share of the phrases its
detections locate, and the chunk's is the `reduce_mode` over its images. A chunk without noun
phrases has recall 1.0. The stat `phrase_grounding_recall` holds one value per such chunk; a
sample without images gets [] and is kept. A sample with images whose image-token count differs
from its image count is rejected with a reason naming the token (Data-Juicer pairs what it can).

Data-Juicer 1.6.1 does not move on to the next chunk's images after a chunk without noun
phrases, so every later chunk is scored against images of the chunks before it. djx pairs each
chunk with its own images; `data_juicer_image_offset: true` restores Data-Juicer's pairing.
"""
from __future__ import annotations

from typing import Literal

from PIL import ImageOps

from djx import Batch, RangeFilter, SampleError, register_op
from djx.core.models.oom import OOM_REASON, forward_with_backoff
from djx.ops.common.grounding import image_recall, nltk_folder, noun_phrases
from djx.ops.filter.image_text_model_filter import _image_side, default_forward_batch, split_chunks
from djx.ops.common.model_op import OneModelOp, check_forward_batch

NLTK_EXTRA = "pip install '.[grounding]' in djx's checkout"


@register_op("phrase_grounding_recall_filter")
class PhraseGroundingRecallFilter(OneModelOp, RangeFilter):
    """Keep samples whose chunks' phrase grounding recall (OWL-ViT) is within [min_recall, max_recall].

    `nltk_data`: a folder holding NLTK's punkt_tab and averaged_perceptron_tagger_eng (default:
    NLTK_DATA, then NLTK's default folders); djx never downloads them. The images of a batch and
    its distinct phrases are each encoded once, `forward_batch_size` per forward, halved on CUDA OOM.
    """

    stats_keys = ("phrase_grounding_recall",)
    stat_shapes = {"phrase_grounding_recall": "per_chunk"}
    stat_ranges = {"phrase_grounding_recall": (0.0, 1.0)}
    uses_images = True
    path_params = ("hf_owlvit", "nltk_data")
    model_kind = "hf_owlvit"
    requires = {"nltk": NLTK_EXTRA}

    def __init__(self, hf_owlvit: str = "google/owlvit-base-patch32", trust_remote_code: bool = False,
                 min_recall: float = 0.1, max_recall: float = 1.0, horizontal_flip: bool = False,
                 vertical_flip: bool = False, any_or_all: Literal["any", "all"] = "any",
                 reduce_mode: Literal["avg", "max", "min"] = "avg", iou_thr: float = 0.5,
                 large_area_ratio_thr: float = 0.95, conf_thr: float = 0.0, nltk_data: str | None = None,
                 dtype: Literal["float32", "bfloat16", "float16", "auto"] = "float32",
                 forward_batch_size: int | None = None, draft_decode: bool = False,
                 data_juicer_image_offset: bool = False, **common):
        super().__init__(**common)
        check_forward_batch(self.name, forward_batch_size)
        self.hf_owlvit, self.trust_remote_code, self.dtype = hf_owlvit, trust_remote_code, dtype
        self.min_recall, self.max_recall, self.any_or_all = min_recall, max_recall, any_or_all
        self.horizontal_flip, self.vertical_flip, self.reduce_mode = horizontal_flip, vertical_flip, reduce_mode
        self.iou_thr, self.large_area_ratio_thr, self.conf_thr = iou_thr, large_area_ratio_thr, conf_thr
        self.forward_batch_size, self.draft_decode = forward_batch_size, draft_decode
        self.data_juicer_image_offset = data_juicer_image_offset
        self.nltk_folder = nltk_folder(nltk_data, self.name)  # at load: a missing one fails the recipe

    @property
    def model_name(self) -> str:
        return self.hf_owlvit

    def chunks(self, sample: dict, batch: Batch) -> list[tuple[list[str], list[str]]]:
        """[(noun phrases, image refs)] per chunk with images; SampleError for a sample that cannot
        be scored (image tokens not matching its images)."""
        refs = batch.image_refs(sample)
        if not refs:
            return []
        parts = split_chunks(batch.text(sample), len(refs), batch.ctx.image_special_token,
                             batch.ctx.eoc_special_token)
        out, offset = [], 0
        for text, first, count in parts:
            phrases = noun_phrases(text, self.nltk_folder)
            if self.data_juicer_image_offset:
                first = offset
                offset += count if phrases else 0
            out.append((phrases, refs[first:first + count]))  # offset <= first: never past the last image
        return out

    def compute_stats(self, batch: Batch) -> None:
        loaded = batch.pool.get(self.spec)
        target = _image_side(loaded.processor) if self.draft_decode else 0
        images, sizes, image_ids, phrase_ids, plan = [], [], {}, {}, []
        for i, sample in enumerate(batch.samples):
            try:
                chunks = self.chunks(sample, batch)
                for ref in batch.image_refs(sample):  # all of them, as Data-Juicer loads them
                    if ref not in image_ids:
                        image = self._prepare(batch.images.rgb(ref, target))
                        image_ids[ref] = len(images)
                        images.append(image)
                        sizes.append(image.size)
                for chunk_phrases, _ in chunks:
                    for p in chunk_phrases:
                        phrase_ids.setdefault(p, len(phrase_ids))
            except SampleError as e:
                batch.reject(i, str(e), e.code)
                continue
            plan.append((i, chunks))
        if not plan:
            return
        import torch
        size = self.forward_batch_size or default_forward_batch(loaded.device)
        with torch.inference_mode():
            seen = forward_with_backoff(lambda c: _encode_images(loaded, c), images, size, loaded.device,
                                        batch.ctx.fault, batch.counters)
            queries = forward_with_backoff(lambda c: _encode_phrases(loaded, c), list(phrase_ids), size,
                                           loaded.device, batch.ctx.fault, batch.counters)
            for i, chunks in plan:
                try:
                    recalls = [self._chunk_recall(loaded, p, [image_ids[r] for r in refs], seen, queries,
                                                  phrase_ids, sizes) for p, refs in chunks]
                except _OutOfMemory:
                    batch.reject(i, OOM_REASON, "oom")
                    continue
                batch.stats(batch.samples[i])[self.stats_keys[0]] = recalls

    def _chunk_recall(self, loaded, chunk_phrases, ids, seen, queries, phrase_ids, sizes) -> float:
        if not chunk_phrases:
            return 1.0
        import torch
        q = [queries[phrase_ids[p]] for p in chunk_phrases]
        if any(x is None for x in q) or any(seen[k] is None for k in ids):
            raise _OutOfMemory
        feats = torch.stack([seen[k][0] for k in ids])
        query = torch.stack(q).to(feats.device)[None].expand(len(ids), -1, -1)
        mask = torch.ones(query.shape[:2], dtype=torch.bool, device=feats.device)
        logits = loaded.model.class_head(feats, query, mask)[0].float().cpu()
        recalls = [image_recall(logits[j], seen[k][1], sizes[k], len(chunk_phrases), self.conf_thr,
                                self.iou_thr, self.large_area_ratio_thr) for j, k in enumerate(ids)]
        if self.reduce_mode == "max":
            return max(recalls)
        if self.reduce_mode == "min":
            return min(recalls)
        return sum(recalls) / len(recalls)

    def keep(self, stats: dict) -> bool:
        return self.keep_values(stats[self.stats_keys[0]], self.min_recall, self.max_recall, self.any_or_all)

    def drop_reason(self, stats: dict) -> str:
        return self.range_reason(self.stats_keys[0], stats[self.stats_keys[0]], self.min_recall, self.max_recall,
                            "min_recall", "max_recall", self.any_or_all)

    def _prepare(self, image):
        if self.horizontal_flip:
            image = ImageOps.mirror(image)
        if self.vertical_flip:
            image = ImageOps.flip(image)
        return image


class _OutOfMemory(Exception):
    """A forward this sample needs ran out of memory even for one item."""


def _encode_images(loaded, images: list) -> list:
    """Per image: (patch features for the class head, on the model's device; predicted boxes, centre
    x, y, width, height in [0, 1], on the host), as OwlViTForObjectDetection computes them."""
    model = loaded.model
    pixels = loaded.processor.image_processor(images, return_tensors="pt")["pixel_values"]
    feature_map = model.image_embedder(pixel_values=pixels.to(loaded.device, loaded.dtype))[0]
    n, h, w, d = feature_map.shape
    feats = feature_map.reshape(n, h * w, d)
    boxes = model.box_predictor(feats, feature_map).float().cpu()
    return list(zip(feats, boxes))


def _encode_phrases(loaded, phrases: list[str]) -> list:
    """Per phrase: OWL-ViT's normalised text embedding (its query for the class head)."""
    import torch
    model = loaded.model.owlvit
    tok = loaded.processor.tokenizer(phrases, padding=True, truncation=True, return_tensors="pt").to(loaded.device)
    pooled = model.text_model(input_ids=tok["input_ids"], attention_mask=tok["attention_mask"]).pooler_output
    embeds = model.text_projection(pooled)
    return list(embeds / torch.linalg.norm(embeds, ord=2, dim=-1, keepdim=True))
