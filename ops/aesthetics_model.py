"""The LAION aesthetics predictors in the checkpoint layout of shunk031's hub models
(`shunk031/aesthetics-predictor-*`, the `simple-aesthetics-predictor` package's classes).

A predictor is CLIP's vision tower with its projection (`CLIPVisionModelWithProjection`), whose
image embedding, L2-normalised, goes through a small head that predicts a score on LAION's 0-10
scale. The head is `predictor` (v1: one linear layer) or `layers` (v2: an MLP, linear or with
ReLUs), with the same module names and indices as those checkpoints, so their config.json and
weights load with `from_pretrained` as they are. Dropout is inactive (eval mode).

Imported only when such a model is loaded: it subclasses a transformers class.
"""
from __future__ import annotations

import torch
from torch import nn
from transformers import CLIPVisionModelWithProjection
from transformers.modeling_outputs import ImageClassifierOutputWithNoAttention


class _Predictor(CLIPVisionModelWithProjection):
    """CLIP vision + projection, then the head on the normalised embedding; `logits`: (n, 1)."""

    def __init__(self, config) -> None:
        super().__init__(config)
        self.add_head(config.projection_dim)
        self.post_init()

    def add_head(self, dim: int) -> None:
        raise NotImplementedError

    def head(self, embeds: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def forward(self, pixel_values: torch.Tensor | None = None, **_) -> ImageClassifierOutputWithNoAttention:
        embeds = super().forward(pixel_values=pixel_values).image_embeds
        embeds = embeds / embeds.norm(dim=-1, keepdim=True)
        return ImageClassifierOutputWithNoAttention(logits=self.head(embeds), hidden_states=embeds)


class AestheticsPredictorV1(_Predictor):
    """LAION aesthetic predictor v1: one linear layer on the embedding."""

    def add_head(self, dim: int) -> None:
        self.predictor = nn.Linear(dim, 1)

    def head(self, embeds: torch.Tensor) -> torch.Tensor:
        return self.predictor(embeds)


class AestheticsPredictorV2Linear(_Predictor):
    """Improved aesthetic predictor (v2), the MLP without activations (`...-linearMSE`)."""

    def add_head(self, dim: int) -> None:
        self.layers = nn.Sequential(
            nn.Linear(dim, 1024), nn.Dropout(0.2), nn.Linear(1024, 128), nn.Dropout(0.2),
            nn.Linear(128, 64), nn.Dropout(0.1), nn.Linear(64, 16), nn.Linear(16, 1))

    def head(self, embeds: torch.Tensor) -> torch.Tensor:
        return self.layers(embeds)


class AestheticsPredictorV2ReLU(AestheticsPredictorV2Linear):
    """Improved aesthetic predictor (v2), the MLP with ReLUs (`...-reluMSE`)."""

    def add_head(self, dim: int) -> None:
        self.layers = nn.Sequential(
            nn.Linear(dim, 1024), nn.ReLU(), nn.Dropout(0.2), nn.Linear(1024, 128), nn.ReLU(),
            nn.Dropout(0.2), nn.Linear(128, 64), nn.ReLU(), nn.Dropout(0.1), nn.Linear(64, 16),
            nn.ReLU(), nn.Linear(16, 1))


HEADS = {cls.__name__: cls for cls in (AestheticsPredictorV1, AestheticsPredictorV2Linear,
                                       AestheticsPredictorV2ReLU)}


def predictor_class(architectures, name: str):
    """The class of a checkpoint: the one its config names, else Data-Juicer's rule on the model
    name ('v1'; 'v2' with 'linear'; 'v2' with 'relu'); None when neither tells."""
    for arch in architectures or ():
        if arch in HEADS:
            return HEADS[arch]
    if "v1" in name:
        return AestheticsPredictorV1
    if "v2" in name and "linear" in name:
        return AestheticsPredictorV2Linear
    if "v2" in name and "relu" in name:
        return AestheticsPredictorV2ReLU
    return None
