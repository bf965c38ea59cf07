from djx import register_op
from djx.ops.common.shapes import pad_rows
from djx.ops.filter.image_text_model_filter import ImageTextModelFilter


@register_op("image_text_matching_filter", aliases=("image_text_match_filter",))
class ImageTextMatchingFilter(ImageTextModelFilter):
    """Keep samples whose chunk texts match their images under BLIP's ITM head (softmax, index 1).

    Each distinct image goes through the vision tower once per batch; the text encoder then runs
    per pair with cross-attention, `forward_batch_size` pairs per forward. dtype: float32
    (default) or bfloat16 (several times faster where bf16 matmuls are fast).

    image_decode (djx only): "cpu" (default: Pillow on the host, Data-Juicer's pixels) or "device":
    JPEG files go to the model's GPU as bytes and are decoded (nvJPEG through torchvision, EXIF
    orientation applied there), resized and cropped there; other formats, CMYK JPEGs and JPEGs the
    GPU decoder refuses are decoded on the host. The resize is Pillow's bit for bit; the GPU's JPEG decoder
    may round pixels differently from libjpeg, so scores may differ slightly. Needs torchvision and a CUDA device: without them the recipe
    fails at load, saying what to install or provide.
    """

    stats_keys = ("image_text_matching_score",)
    stat_ranges = {"image_text_matching_score": (0.0, 1.0)}  # a probability
    model_kind = "hf_blip_itm"
    path_params = ("hf_blip",)

    def __init__(self, hf_blip: str = "Salesforce/blip-itm-base-coco", min_score: float = 0.003,
                 max_score: float = 1.0, **kw):
        super().__init__(min_score=min_score, max_score=max_score, **kw)
        self.hf_blip = hf_blip

    @property
    def model_name(self) -> str:
        return self.hf_blip

    def score(self, loaded, prepared, fault=(), counters=None):
        import torch
        model, device = loaded.model, loaded.device

        def encode_images(rows):  # on a GPU in a known shape (shapes.py); the padding's outputs dropped
            pixels = pad_rows(self.pixel_rows(loaded, prepared, rows, counters))
            return list(model.vision_model(pixel_values=pixels).last_hidden_state[:len(rows)])

        vision = self.forward(encode_images, list(range(prepared.n_images)), loaded, fault, counters)

        def match(chunk):
            tok = self.token_rows(loaded, prepared, [t for t, _ in chunk], counters)
            embeds = torch.stack([vision[i] for _, i in chunk])
            atts = torch.ones(embeds.shape[:-1], dtype=torch.long, device=device)
            hidden = model.text_encoder(input_ids=tok["input_ids"], attention_mask=tok["attention_mask"],
                                        encoder_hidden_states=embeds,
                                        encoder_attention_mask=atts).last_hidden_state
            probs = torch.softmax(model.itm_head(hidden[:, 0, :]).float(), dim=-1)[:, 1]
            return probs.tolist()

        usable = [p for p in prepared.pairs if vision[p[1]] is not None]
        scored = dict(zip(usable, self.forward(match, usable, loaded, fault, counters)))
        return [scored.get(p) for p in prepared.pairs]
