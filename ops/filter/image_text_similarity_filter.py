from djx import Batch, register_op
from djx.ops.common.prepared import PairScores
from djx.ops.common.shapes import pad_inputs, pad_rows
from djx.ops.filter.image_text_model_filter import ImageTextModelFilter


@register_op("image_text_similarity_filter")
class ImageTextSimilarityFilter(ImageTextModelFilter):
    """Keep samples whose chunk texts and images are similar under CLIP (score = logits_per_text / 100).

    Image and text features are each computed once per distinct image / text of the batch, so a
    batch costs one vision forward per `forward_batch_size` images. dtype: float32 (default,
    Data-Juicer's numerics) or bfloat16 (several times faster on GPUs and CPUs with bf16 matmuls).

    image_decode (djx only): "cpu" (default: Pillow on the host, Data-Juicer's pixels) or "device":
    JPEG files go to the model's GPU as bytes and are decoded (nvJPEG through torchvision, EXIF
    orientation applied there), resized and cropped there; other formats, CMYK JPEGs and JPEGs the
    GPU decoder refuses are decoded on the host. The resize is Pillow's bit for bit; the GPU's JPEG decoder
    may round pixels differently from libjpeg, so scores may differ slightly. Needs torchvision and a CUDA device: without them the recipe
    fails at load, saying what to install or provide.
    """

    stats_keys = ("image_text_similarity",)
    stat_ranges = {"image_text_similarity": (-1.0001, 1.0001)}  # a cosine (and float rounding)
    model_kind = "hf_clip"
    path_params = ("hf_clip",)

    embedding_key: str | None = None  # also written: each sample's image embedding (write_embeddings)

    def __init__(self, hf_clip: str = "openai/clip-vit-base-patch32", min_score: float = 0.1,
                 max_score: float = 1.0, **kw):
        super().__init__(min_score=min_score, max_score=max_score, **kw)
        self.hf_clip = hf_clip

    def embeds_as_host_does(self) -> bool:
        """Whether its image features are those of the host's Pillow pixels, unflipped, at full
        size: what image_semantic_deduplicator embeds (so one forward can serve both)."""
        return not (self.horizontal_flip or self.vertical_flip or self.draft_decode) and self.image_decode == "cpu"

    def write_embeddings(self, key: str) -> None:
        """Also write each scored sample's image embedding (image_semantic_deduplicator's stat, which
        that op then takes instead of running the image tower again)."""
        self.embedding_key = key
        self.stats_keys = (type(self).stats_keys[0], key)

    @property
    def stat_shapes(self) -> dict[str, str]:
        return {**super().stat_shapes, **({self.embedding_key: "digest"} if self.embedding_key else {})}

    @property
    def model_name(self) -> str:
        return self.hf_clip

    def score(self, loaded, prepared, fault=(), counters=None):
        model = loaded.model

        def encode_images(rows):  # on a GPU in a known shape (shapes.py); the padding's outputs dropped
            out = model.vision_model(pixel_values=pad_rows(self.pixel_rows(loaded, prepared, rows, counters)))
            feats = model.visual_projection(out.pooler_output[:len(rows)]).float()
            return list((feats / feats.norm(dim=-1, keepdim=True)).cpu())  # one copy per chunk

        def encode_texts(rows):
            out = model.text_model(**pad_inputs(self.token_rows(loaded, prepared, rows, counters), loaded.device))
            feats = model.text_projection(out.pooler_output[:len(rows)]).float()
            return list((feats / feats.norm(dim=-1, keepdim=True)).cpu())  # one copy per chunk

        img = self.forward(encode_images, list(range(prepared.n_images)), loaded, fault, counters)
        txt = self.forward(encode_texts, list(range(len(prepared.tokens))), loaded, fault, counters)
        scale = float(model.logit_scale.exp()) / 100.0
        # per-pair dot products on the host: no device sync per pair
        out = PairScores(None if img[i] is None or txt[t] is None else float(txt[t] @ img[i]) * scale
                         for t, i in prepared.pairs)
        if self.embedding_key:  # the image embeddings go back too, for image_semantic_deduplicator
            out.images = [None if v is None else v.numpy() for v in img]
        return out

    def finish(self, batch: Batch, plan: list, scores: list) -> None:
        super().finish(batch, plan, scores)
        images = getattr(scores, "images", None)
        if not self.embedding_key or images is None:
            return
        from djx.ops.common.embeddings import encode_embedding, sample_embedding
        for i, sample_chunks in enumerate(plan):
            stats = batch.stats(batch.samples[i]) if sample_chunks is not None else {}
            vectors = [images[r] for r in getattr(sample_chunks, "images", ())]
            if self.stat in stats and all(v is not None for v in vectors):  # scored, not rejected
                stats[self.embedding_key] = encode_embedding(sample_embedding(vectors)) if vectors else ""
