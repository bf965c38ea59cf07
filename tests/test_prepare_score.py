"""The image-text model filters in three steps: prepare (host: chunks, decode, processor,
tokenizer), score (the model, from the prepared tensors alone) and finish (the batch's stats).
What prepare hands over is plain data that pickles without images or batch, and batches prepared
apart (as different workers prepare them) scored together give each sample the scores it gets
in its own batch: what a scoring process that batches across workers relies on."""
import pickle
import random

import pytest
import torch

from djx.core.models.pool import ModelPool
from djx.core.op.base import Batch
from djx.core.op.images import BatchImages
from djx.core.recipe.context import RunContext
from djx.ops.common.prepared import join, split
from djx.ops.filter.image_text_matching_filter import ImageTextMatchingFilter
from djx.ops.filter.image_text_model_filter import max_text_len
from djx.ops.filter.image_text_similarity_filter import ImageTextSimilarityFilter
from djx.tools import synth

from test_multimodal import BLIP, CLIP, EOC, IMG, multi_chunk_samples

pytestmark = [pytest.mark.slow, pytest.mark.models]

OPS = {"clip": lambda: ImageTextSimilarityFilter(hf_clip=CLIP, min_score=-1.0, forward_batch_size=4),
       "blip": lambda: ImageTextMatchingFilter(hf_blip=BLIP, min_score=0.0, forward_batch_size=3)}


def batch_of(samples, folder, pool):
    ctx = RunContext()
    return Batch([dict(s) for s in samples], ctx, BatchImages(str(folder), ctx.max_image_pixels), pool,
                 ctx.text_key, ctx.image_key)


def stat_values(op, batch):
    return [batch.stats(s).get(op.stat) for s in batch.samples]


@pytest.mark.parametrize("kind", OPS)
def test_batches_prepared_apart_and_scored_together_get_their_own_scores(tmp_path, kind):
    op, pool = OPS[kind](), ModelPool("cpu")
    samples = multi_chunk_samples(tmp_path)
    samples[3] = {"text": f"{IMG} a sample whose image is missing {EOC}", "images": ["nowhere.png"]}
    halves = [samples[:7], samples[7:]]
    alone = []  # each half as one worker's batch, the whole op in that worker
    for part in halves:
        batch = batch_of(part, tmp_path, pool)
        op.compute_stats(batch)
        alone.append((stat_values(op, batch), dict(batch.rejected)))

    loaded = pool.get(op.spec)
    batches = [batch_of(part, tmp_path, pool) for part in halves]
    prepared = [op.prepare(b, loaded.processor, max_text_len(loaded.model)) for b in batches]
    # what crosses to a scoring process: tensors and lists, no image, no batch, no model
    payloads = [pickle.loads(pickle.dumps(p)) for p, _ in prepared]
    # the pixels as uint8 with the processor's value table (rescale and normalisation where the model is)
    assert all(isinstance(p.pixels, torch.Tensor) and p.pixels.dtype == torch.uint8 for p in payloads)
    assert all(p.pixel_table.dtype == torch.float32 for p in payloads)
    with torch.inference_mode():
        scores = op.score(loaded, join(payloads))
    for b, (_, plan), own, (want, rejected) in zip(batches, prepared, split(scores, payloads), alone):
        op.finish(b, plan, own)
        assert b.rejected == rejected
        for got, ref in zip(stat_values(op, b), want):
            assert (got is None) == (ref is None)
            if got is not None:
                assert got == pytest.approx(ref, abs=1e-6)
    assert 3 in batches[0].rejected and "nowhere.png" in batches[0].rejected[3]


def test_prepare_decodes_each_distinct_image_once_and_tokenizes_each_distinct_text_once(tmp_path):
    rng = random.Random(3)
    image, cap, _ = synth.random_pair(rng, size=64)
    image.save(tmp_path / "a.png")
    samples = [{"text": f"{IMG} {cap}", "images": ["a.png"]} for _ in range(5)]
    samples.append({"text": f"{IMG} {IMG} {cap} {EOC}", "images": ["a.png", "a.png"]})
    op, pool = OPS["clip"](), ModelPool("cpu")
    loaded = pool.get(op.spec)
    batch = batch_of(samples, tmp_path, pool)
    prepared, plan = op.prepare(batch, loaded.processor, max_text_len(loaded.model))
    assert prepared.n_images == 1 and len(prepared.tokens) == 1
    assert prepared.pairs == [(0, 0)] * 7 and plan[-1] == [[5, 6]]


@pytest.mark.parametrize("kind", OPS)
def test_on_a_gpu_forwards_meet_few_shapes_and_the_padding_changes_no_score(tmp_path, kind, monkeypatch):
    """On CUDA the scorer pads each forward's rows to a power of two from 32 and its texts to a power
    of two from 16, and leaves cuDNN's attention out (ops/common/shapes.py): here the CPU is taken
    for a GPU, and every tower sees only such shapes, without cuDNN's attention, while each pair's
    score stays what it is unpadded."""
    from djx.ops.common import shapes
    op, pool = OPS[kind](), ModelPool("cpu")
    loaded = pool.get(op.spec)
    batch = batch_of(multi_chunk_samples(tmp_path), tmp_path, pool)
    prepared, _ = op.prepare(batch, loaded.processor, max_text_len(loaded.model))
    with torch.inference_mode():
        plain = op.score(loaded, prepared)
    seen = []
    model = loaded.model
    towers = [model.vision_model] + ([model.text_model] if kind == "clip" else [model.text_encoder])

    cudnn = []  # cuDNN's attention (a plan built per shape) is left out while the towers run

    def shape_of(module, args, kwargs):
        x = kwargs.get("pixel_values", kwargs.get("input_ids", args[0] if args else None))
        seen.append(tuple(x.shape))
        cudnn.append(torch.backends.cuda.cudnn_sdp_enabled())
    hooks = [t.register_forward_pre_hook(shape_of, with_kwargs=True) for t in towers]
    monkeypatch.setattr(shapes, "_cuda", lambda device: True)
    try:
        with torch.inference_mode():
            padded = op.score(loaded, prepared)
    finally:
        for h in hooks:
            h.remove()
    assert cudnn and not any(cudnn) and torch.backends.cuda.cudnn_sdp_enabled()  # restored after
    assert len(padded) == len(plain) and [s is None for s in padded] == [s is None for s in plain]
    assert [s for s in padded if s is not None] == pytest.approx([s for s in plain if s is not None], abs=1e-5)
    pixel_shapes = [s for s in seen if len(s) == 4]
    text_shapes = [s for s in seen if len(s) == 2]
    powers = {shapes.ROWS << k for k in range(8)}
    assert pixel_shapes and all(s[0] in powers for s in pixel_shapes)
    lengths = {shapes.TOKENS << k for k in range(8)} | {max_text_len(model)}
    assert text_shapes and all(s[1] in lengths for s in text_shapes)
    if kind == "clip":  # its text tower's rows too (BLIP's text rows pair with image rows: not padded)
        assert all(s[0] in powers for s in text_shapes)
