"""A plug-in op loaded by file path for the Ray executor tests (`custom_ops: [.../ray_plugin_ops.py]`).

token_layout_filter's stats depend on both special tokens of the run, read from the RunContext it
is handed: with the wrong tokens (say a module default instead of the recipe's) they come out
different. letter_score_filter declares a model (a tiny stand-in loader), so recipes can group
ops by model without real weights.
"""
from djx import Batch, Filter, ModelSpec, register_model_loader, register_op


@register_op("token_layout_filter")
class TokenLayoutFilter(Filter):
    """Keep samples whose text has between min_chunks and max_chunks eoc-separated chunks holding
    an image token; stats: image_tokens (count) and image_chunks."""

    stats_keys = ("image_tokens", "image_chunks")

    def __init__(self, min_chunks: int = 0, max_chunks: int = 1_000_000, **common):
        super().__init__(**common)
        self.min_chunks, self.max_chunks = min_chunks, max_chunks

    def compute_stats(self, batch: Batch) -> None:
        image, eoc = batch.ctx.image_special_token, batch.ctx.eoc_special_token
        for sample in batch.samples:
            text = batch.text(sample)
            stats = batch.stats(sample)
            stats["image_tokens"] = text.count(image)
            stats["image_chunks"] = sum(1 for chunk in text.split(eoc) if image in chunk)

    def keep(self, stats: dict) -> bool:
        return self.min_chunks <= stats["image_chunks"] <= self.max_chunks


@register_model_loader("letter_table", estimate=lambda spec: 1 << 20)
def load_letter_table(spec: ModelSpec, device: str) -> dict:
    """A stand-in 'model' (no weights needed): a score per letter, named by the spec."""
    return {c: (ord(c) * len(spec.name)) % 7 / 6 for c in "abcdefghijklmnopqrstuvwxyz"}


@register_op("letter_score_filter")
class LetterScoreFilter(Filter):
    """Keep samples whose mean letter score under the table `model` is at least min_score; ops
    naming the same table share one loaded copy per process, like two ops naming one CLIP."""

    stats_keys = ("letter_score",)

    def __init__(self, model: str = "table", min_score: float = 0.0, **common):
        super().__init__(**common)
        self.spec = ModelSpec("letter_table", model)
        self.min_score = min_score

    def model_specs(self) -> list:
        return [self.spec]

    def compute_stats(self, batch: Batch) -> None:
        table = batch.pool.get(self.spec)
        for sample in batch.samples:
            letters = [table[c] for c in batch.text(sample).lower() if c in table]
            batch.stats(sample)["letter_score"] = sum(letters) / len(letters) if letters else 0.0

    def keep(self, stats: dict) -> bool:
        return stats["letter_score"] >= self.min_score


@register_model_loader("letter_weights", estimate=lambda spec: 26 * 26 * 4)
def load_letter_weights(spec: ModelSpec, device: str):
    """A plug-in's model with weights (a 26 x 26 linear map, seeded by the spec's name), which
    several actors of a Ray run share through the object store."""
    import torch
    torch.manual_seed(len(spec.name))
    return torch.nn.Linear(26, 26, bias=False).to(device)


@register_op("letter_weight_filter")
class LetterWeightFilter(Filter):
    """Keep samples whose letter counts, through the linear map `model`, sum to at least min_score."""

    stats_keys = ("letter_weight",)

    def __init__(self, model: str = "weights", min_score: float = 0.0, **common):
        super().__init__(**common)
        self.spec = ModelSpec("letter_weights", model)
        self.min_score = min_score

    def model_specs(self) -> list:
        return [self.spec]

    def compute_stats(self, batch: Batch) -> None:
        import torch
        linear = batch.pool.get(self.spec)
        for sample in batch.samples:
            counts = torch.zeros(26)
            for c in batch.text(sample).lower():
                if "a" <= c <= "z":
                    counts[ord(c) - ord("a")] += 1
            with torch.no_grad():
                batch.stats(sample)["letter_weight"] = round(float(linear(counts).sum()), 4)

    def keep(self, stats: dict) -> bool:
        return stats["letter_weight"] >= self.min_score
