"""Data-Juicer's `tokenization` switch of the word ops: with it on, words are the pieces of a
SentencePiece model at `tokenizer_model` (unset: Data-Juicer's `{lang}.sp.model` where its model
cache has it). Shared by the word filters and the word-removing mapper."""
from __future__ import annotations

import os

from djx import RecipeError
from djx.ops.common.dj_cache import dj_models_dir, in_dj_dirs, not_found
from djx.ops.common.text_words import TEXT_EXTRA, load_sentencepiece


class SentencePieceWords:
    """Mixin of an op with `lang`, `tokenization`, `tokenizer_model` and `tokenizer` attributes: a
    missing model is said at load (missing_resources), the model read once (load_resources)."""

    path_params = ("tokenizer_model",)

    def load_resources(self) -> None:
        if self.tokenization and self.tokenizer is None:
            try:
                self.tokenizer = load_sentencepiece(self.tokenizer_model or in_dj_dirs(f"{self.lang}.sp.model"),
                                                    self.lang)
            except ImportError:
                raise RecipeError(f"{self.name}: tokenization: true needs the Python package "
                                  f"'sentencepiece', which is not installed: {TEXT_EXTRA}") from None

    @classmethod
    def missing_resources(cls, params: dict) -> list[str]:
        lang = params["lang"]
        if not params["tokenization"] or params["tokenizer_model"] or in_dj_dirs(f"{lang}.sp.model"):
            return []
        return [not_found("tokenizer_model", f"a SentencePiece model for {lang!r} (tokenization: true)",
                          os.path.join(dj_models_dir(), f"{lang}.sp.model"))]
