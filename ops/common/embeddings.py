"""A sample's image embedding as a stat (`image_embedding`): written by image_semantic_deduplicator,
or by an image_text_similarity_filter on the same CLIP for it (one forward for both)."""
from __future__ import annotations

import base64
import binascii

import numpy as np

from djx import DjxError

EMBEDDING_KEY = "image_embedding"


def encode_embedding(vector: np.ndarray) -> str:
    """The stat's text: base64 of the vector as little-endian float16 ('' for a sample without images)."""
    return base64.b64encode(np.asarray(vector, dtype="<f2").tobytes()).decode("ascii")


def decode_embedding(text: str) -> np.ndarray | None:
    """The vector a stat holds (None for '': no images); float16 keeps a cosine to ~1e-3."""
    if not text:
        return None
    try:
        vector = np.frombuffer(base64.b64decode(text, validate=True), dtype="<f2").astype(np.float32)
    except (binascii.Error, ValueError):
        vector = None
    if vector is None or not len(vector) or not np.isfinite(vector).all():
        raise DjxError(f"{EMBEDDING_KEY} {text[:40]!r}... is not an embedding djx wrote (base64 of float16): "
                       f"run again with recompute_stats: true")
    return vector


def sample_embedding(vectors: list[np.ndarray]) -> np.ndarray:
    """A sample's embedding: the mean of its images' unit embeddings, scaled to unit length again."""
    mean = np.mean(vectors, axis=0)
    norm = float(np.linalg.norm(mean))
    return mean / norm if norm > 0 else mean
