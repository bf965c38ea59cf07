from djx import register_op
from djx.ops.filter.image_text_model_filter import ImageTextModelFilter, max_text_len


@register_op("image_text_similarity_filter")
class ImageTextSimilarityFilter(ImageTextModelFilter):
    """Keep samples whose chunk texts and images are similar under CLIP (score = logits_per_text / 100).

    Image and text features are each computed once per distinct image / text of the batch, so a
    batch costs one vision forward per `forward_batch_size` images. dtype: float32 (default,
    Data-Juicer's numerics) or bfloat16 (several times faster on GPUs and CPUs with bf16 matmuls).
    """

    stats_keys = ("image_text_similarity",)
    stat_ranges = {"image_text_similarity": (-1.0001, 1.0001)}  # a cosine (and float rounding)
    model_kind = "hf_clip"
    path_params = ("hf_clip",)

    def __init__(self, hf_clip: str = "openai/clip-vit-base-patch32", min_score: float = 0.1,
                 max_score: float = 1.0, **kw):
        super().__init__(min_score=min_score, max_score=max_score, **kw)
        self.hf_clip = hf_clip

    @property
    def model_name(self) -> str:
        return self.hf_clip

    def score_pairs(self, loaded, batch, texts, images, pairs):
        model, proc, device = loaded.model, loaded.processor, loaded.device

        def encode_images(chunk):
            out = model.vision_model(pixel_values=self.pixels(loaded, chunk))
            feats = model.visual_projection(out.pooler_output).float()
            return list((feats / feats.norm(dim=-1, keepdim=True)).cpu())  # one copy per chunk

        def encode_texts(chunk):
            tok = proc.tokenizer(chunk, padding=True, truncation=True, max_length=max_text_len(model),
                                 return_tensors="pt").to(device)
            out = model.text_model(input_ids=tok["input_ids"], attention_mask=tok["attention_mask"])
            feats = model.text_projection(out.pooler_output).float()
            return list((feats / feats.norm(dim=-1, keepdim=True)).cpu())  # one copy per chunk

        img = self.forward(encode_images, images, loaded, batch)
        txt = self.forward(encode_texts, texts, loaded, batch)
        scale = float(model.logit_scale.exp()) / 100.0
        # per-pair dot products on the host: no device sync per pair
        return [None if img[i] is None or txt[t] is None else float(txt[t] @ img[i]) * scale
                for t, i in pairs]
