"""The multimodal filters on the shipped tiny models: real models, the same from_pretrained path a
hub id takes, batched scoring equal to a plain per-chunk forward, tokens carried by value, one
model per process, OOM back-off."""
import json
import random
from pathlib import Path

import pytest
from PIL import Image

from djx import DjxError, Pipeline
from djx.core.recipe.recipe import recipe_from_dict
from djx.ops.filter.image_text_matching_filter import ImageTextMatchingFilter
from djx.ops.filter.image_text_similarity_filter import ImageTextSimilarityFilter
from djx.tools import synth

from conftest import read_jsonl_file

pytestmark = [pytest.mark.slow, pytest.mark.models]  # real model forwards, seconds each

MODELS = Path(__file__).parent / "assets" / "models"
CLIP = str(MODELS / "tiny-clip")
BLIP = str(MODELS / "tiny-blip-itm")
IMG, EOC = "<__dj__image>", "<|__dj__eoc|>"


def held_out(tmp_path, n, seed=12345):
    """n held-out images (unseen seeds, varied sizes) each with its true and a wrong caption."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        image, cap, attrs = synth.random_pair(rng, size=rng.choice([64, 80, 96, 128]))
        path = tmp_path / f"h{i}.png"
        image.save(path)
        out.append((path.name, cap, synth.mismatched_caption(rng, attrs)))
    return out


def scores(op, tmp_path, samples):
    pipe = Pipeline(ops=[op], dataset_path=str(tmp_path / "any.jsonl"), batch_size=64)
    kept = list(pipe.process(samples))
    assert len(kept) == len(samples), pipe.last_counts
    return [s["__dj__stats__"][op.stats_keys[0]] for s in kept]


@pytest.mark.parametrize("make_op", [
    lambda: ImageTextSimilarityFilter(hf_clip=CLIP, min_score=-1.0),
    lambda: ImageTextMatchingFilter(hf_blip=BLIP, min_score=0.0),
], ids=["clip", "blip"])
def test_tiny_models_score_matching_captions_above_mismatched_ones(tmp_path, make_op):
    pairs = held_out(tmp_path, 200)
    true = scores(make_op(), tmp_path, [{"text": f"{IMG} {t}", "images": [p]} for p, t, _ in pairs])
    wrong = scores(make_op(), tmp_path, [{"text": f"{IMG} {w}", "images": [p]} for p, _, w in pairs])
    wins = sum(t[0] > w[0] for t, w in zip(true, wrong))
    assert wins / len(pairs) >= 0.95, f"held-out accuracy {wins / len(pairs):.3f}"


def reference_clip(samples, folder):
    """Data-Juicer's computation, one plain forward per chunk: logits_per_text / 100, averaged."""
    import torch
    from transformers import AutoProcessor, CLIPModel  # here: importing them costs every run's collection 3 s
    model = CLIPModel.from_pretrained(CLIP).eval()
    proc = AutoProcessor.from_pretrained(CLIP)
    out = []
    for s in samples:
        imgs, per_chunk = [Image.open(folder / r).convert("RGB") for r in s["images"]], []
        k = 0
        for chunk in s["text"].split(EOC):
            n = chunk.count(IMG)
            if not n:
                continue
            text = chunk.replace(IMG, "").strip()
            inputs = proc(text=[text], images=imgs[k:k + n], return_tensors="pt", padding=True,
                          truncation=True, max_length=model.config.text_config.max_position_embeddings)
            with torch.no_grad():
                per_chunk.append(float((model(**inputs).logits_per_text / 100.0).mean()))
            k += n
        out.append(per_chunk)
    return out


def reference_blip(samples, folder):
    import torch
    from transformers import AutoProcessor, BlipForImageTextRetrieval
    model = BlipForImageTextRetrieval.from_pretrained(BLIP).eval()
    proc = AutoProcessor.from_pretrained(BLIP)
    out = []
    for s in samples:
        imgs, per_chunk, k = [Image.open(folder / r).convert("RGB") for r in s["images"]], [], 0
        for chunk in s["text"].split(EOC):
            n = chunk.count(IMG)
            if not n:
                continue
            text = chunk.replace(IMG, "").strip()
            inputs = proc(text=[text] * n, images=imgs[k:k + n], return_tensors="pt", padding=True,
                          truncation=True, max_length=model.config.text_config.max_position_embeddings)
            with torch.no_grad():
                probs = torch.softmax(model(**inputs, use_itm_head=True).itm_score, dim=-1)[:, 1]
            per_chunk.append(float(probs.mean()))
            k += n
        out.append(per_chunk)
    return out


def multi_chunk_samples(tmp_path):
    rng = random.Random(7)
    samples = []
    for i in range(12):
        names, parts = [], []
        for c in range(1 + i % 3):
            n_img = 1 + (i + c) % 2
            image, cap, attrs = synth.random_pair(rng, size=96)
            for j in range(n_img):
                name = f"m{i}_{c}_{j}.png"
                image.save(tmp_path / name)
                names.append(name)
            text = cap if (i + c) % 4 else synth.mismatched_caption(rng, attrs)
            parts.append(" ".join([IMG] * n_img) + f" {text} {EOC}")
        parts.append("a trailing chunk without images")
        samples.append({"text": " ".join(parts), "images": names})
    return samples


def test_batched_scores_equal_a_plain_forward_per_chunk(tmp_path):
    samples = multi_chunk_samples(tmp_path)
    clip = scores(ImageTextSimilarityFilter(hf_clip=CLIP, min_score=-1.0, draft_decode=False,
                                            forward_batch_size=5), tmp_path, samples)
    blip = scores(ImageTextMatchingFilter(hf_blip=BLIP, min_score=0.0, draft_decode=False,
                                          forward_batch_size=3), tmp_path, samples)
    for got, ref in ((clip, reference_clip(samples, tmp_path)), (blip, reference_blip(samples, tmp_path))):
        assert [len(g) for g in got] == [len(r) for r in ref] == [1 + i % 3 for i in range(12)]
        for g, r in zip(got, ref):
            assert g == pytest.approx(r, abs=1e-5)


def test_reduce_mode_any_or_all_and_flips_follow_data_juicer(tmp_path):
    samples = multi_chunk_samples(tmp_path)
    avg = scores(ImageTextSimilarityFilter(hf_clip=CLIP, min_score=-1.0), tmp_path, samples)
    mx = scores(ImageTextSimilarityFilter(hf_clip=CLIP, min_score=-1.0, reduce_mode="max"), tmp_path, samples)
    mn = scores(ImageTextSimilarityFilter(hf_clip=CLIP, min_score=-1.0, reduce_mode="min"), tmp_path, samples)
    for a, b, c in zip(avg, mx, mn):
        for x, y, z in zip(a, b, c):
            assert z - 1e-6 <= x <= y + 1e-6
    flipped = scores(ImageTextSimilarityFilter(hf_clip=CLIP, min_score=-1.0, horizontal_flip=True,
                                               vertical_flip=True), tmp_path, samples)
    assert flipped != avg
    op_all = ImageTextSimilarityFilter(hf_clip=CLIP, min_score=0.2, any_or_all="all")
    op_any = ImageTextSimilarityFilter(hf_clip=CLIP, min_score=0.2, any_or_all="any")
    for stats in avg:
        assert op_all.keep({"image_text_similarity": stats}) == all(v >= 0.2 for v in stats)
        assert op_any.keep({"image_text_similarity": stats}) == any(v >= 0.2 for v in stats)
    assert op_all.keep({"image_text_similarity": []})  # no images: kept, as in Data-Juicer


def test_image_token_mismatch_is_rejected_with_the_token_named_and_stops_a_misconfigured_run(tmp_path):
    Image.new("RGB", (64, 64), "red").save(tmp_path / "r.png")
    good = {"text": f"{IMG} a red square on a white background", "images": ["r.png"]}
    samples = [good, {"text": "no token at all", "images": ["r.png"]},
               {"text": f"{IMG} {IMG} two tokens", "images": ["r.png"]}, {"text": "text only", "images": []}]
    pipe = Pipeline(ops=[ImageTextSimilarityFilter(hf_clip=CLIP, min_score=-1.0)],
                    dataset_path=str(tmp_path / "d.jsonl"))
    kept = list(pipe.process(samples))
    assert [k["text"] for k in kept] == [good["text"], "text only"]
    assert kept[1]["__dj__stats__"]["image_text_similarity"] == []
    reasons = [r["reason"] for r in pipe.last_counts["rejected_records"]]
    assert len(reasons) == 2 and all(IMG in r and "image_special_token" in r for r in reasons)
    assert {r["code"] for r in pipe.last_counts["rejected_records"]} == {"image_token_mismatch"}

    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"text": "<image> a red square", "images": ["r.png"]}) + "\n"
                            for _ in range(80)))
    recipe = recipe_from_dict({"dataset_path": str(data), "export_path": str(tmp_path / "o/o.jsonl"),
                               "process": [{"image_text_similarity_filter": {"hf_clip": CLIP}}],
                               "np": 1, "batch_size": 16}, str(tmp_path))
    with pytest.raises(DjxError, match="Check image_special_token"):
        Pipeline(recipe=recipe).run(progress=False, log=lambda *a: None)
    assert not (tmp_path / "o/o.jsonl").exists()


def test_a_corrupt_image_rejects_only_its_sample_in_a_model_filter(tmp_path):
    Image.effect_noise((256, 256), 50).convert("RGB").save(tmp_path / "ok.jpg", quality=95)
    data = (tmp_path / "ok.jpg").read_bytes()
    (tmp_path / "cut.jpg").write_bytes(data[: len(data) * 2 // 3])
    pipe = Pipeline(ops=[ImageTextMatchingFilter(hf_blip=BLIP, min_score=0.0)],
                    dataset_path=str(tmp_path / "d.jsonl"))
    samples = [{"text": f"{IMG} noise", "images": ["ok.jpg"]}, {"text": f"{IMG} noise", "images": ["cut.jpg"]}]
    kept = list(pipe.process(samples))
    assert len(kept) == 1 and kept[0]["images"] == ["ok.jpg"]
    assert "cut.jpg" in pipe.last_counts["rejected_records"][0]["reason"]


def run_recipe(tmp_path, name, process, data, **keys):
    recipe = recipe_from_dict({"dataset_path": str(data), "export_path": str(tmp_path / name / "o.jsonl"),
                               "process": process, **keys}, str(tmp_path))
    summary = Pipeline(recipe=recipe).run(progress=False, log=lambda *a: None)
    return summary, read_jsonl_file(tmp_path / name / "o.jsonl"), read_jsonl_file(tmp_path / name / "o.dropped.jsonl")


def demo_process():
    return [{"image_text_similarity_filter": {"hf_clip": CLIP, "min_score": 0.2}},
            {"image_text_matching_filter": {"hf_blip": BLIP, "min_score": 0.5}}]


@pytest.mark.spawn
def test_custom_tokens_reach_spawn_workers_and_give_the_same_stats_as_default_tokens(tmp_path):
    from djx.tools.make_demo_data import write_demo
    default_dir, custom_dir = tmp_path / "default", tmp_path / "custom"
    write_demo(default_dir, n=40)
    write_demo(custom_dir, image_token="<image>", eoc_token="<eoc>", n=40)
    base, kept_a, dropped_a = run_recipe(tmp_path, "a", demo_process(), default_dir / "demo.jsonl", np=1)
    custom, kept_b, dropped_b = run_recipe(tmp_path, "b", demo_process(), custom_dir / "demo.jsonl", np=2,
                                           start_method="spawn", batch_size=8,
                                           image_special_token="<image>", eoc_special_token="<eoc>")
    assert custom["rejected"] == base["rejected"] == 0 and custom["check"]["ok"]
    assert custom["workers"] == 2 and len(custom["model_loads"]) == 2

    def stats(rows):
        return {r["__dj__pos__"]: r["__dj__stats__"] for r in rows}

    got, want = stats(kept_b + dropped_b), stats(kept_a + dropped_a)
    assert got.keys() == want.keys() and len(got) == 40
    for pos in want:
        for key, value in want[pos].items():
            assert got[pos][key] == pytest.approx(value, abs=1e-6)
    assert any(len(v["image_text_similarity"]) > 1 for v in want.values())  # multi-chunk covered


@pytest.mark.spawn
def test_two_ops_naming_one_model_share_one_copy_per_worker(tmp_path):
    from djx.tools.make_demo_data import write_demo
    write_demo(tmp_path / "d", n=16)
    process = [{"image_text_similarity_filter": {"hf_clip": CLIP, "min_score": 0.0}},
               {"image_text_similarity_filter": {"hf_clip": CLIP, "min_score": 0.0, "reduce_mode": "max"}}]
    summary, _, _ = run_recipe(tmp_path, "o", process, tmp_path / "d/demo.jsonl", np=2, start_method="spawn",
                               batch_size=4)
    assert summary["workers"] == 2
    for loads in summary["model_loads"].values():
        assert sum(loads.values()) == 1, loads
    assert summary["max_model_loads_per_process"] == 1


def test_cuda_oom_backoff_halves_the_forward_and_keeps_the_results(tmp_path):
    from djx.tools.make_demo_data import write_demo
    write_demo(tmp_path / "d", n=24)
    data = tmp_path / "d/demo.jsonl"
    process = [{"image_text_similarity_filter": {"hf_clip": CLIP, "min_score": 0.2, "forward_batch_size": 16}},
               {"image_text_matching_filter": {"hf_blip": BLIP, "min_score": 0.5, "forward_batch_size": 16}}]
    base, kept, dropped = run_recipe(tmp_path, "base", process, data, np=1)
    faulty, kept_f, dropped_f = run_recipe(tmp_path, "oom", process, data, np=1, inject_faults=["oom_above:2"])
    assert base["events"].get("oom_retries", 0) == 0 and faulty["events"]["oom_retries"] >= 6
    assert [k["__dj__pos__"] for k in kept_f] == [k["__dj__pos__"] for k in kept]
    for a, b in zip(kept + dropped, kept_f + dropped_f):
        for key in a["__dj__stats__"]:
            assert b["__dj__stats__"][key] == pytest.approx(a["__dj__stats__"][key], abs=1e-5)

    # Out of memory even for one pair, on every sample: the run says so and exits non-zero, with
    # every reason written; a user who accepts such a run says so in the recipe.
    with pytest.raises(DjxError, match=r"24 of 24 samples .* rejected as oom"):
        run_recipe(tmp_path, "never", process, data, np=1, inject_faults=["oom_always"])
    assert len(read_jsonl_file(tmp_path / "never/o.rejected.jsonl")) == 24
    hopeless, kept_h, _ = run_recipe(tmp_path, "accepted", process, data, np=1, inject_faults=["oom_always"],
                                     max_rejected_fraction=1.0)
    rejected = read_jsonl_file(tmp_path / "accepted/o.rejected.jsonl")
    assert hopeless["check"]["ok"] and hopeless["input"] == 24 == len(rejected) + len(kept_h) + hopeless["dropped"]
    assert rejected and all("out of memory" in r["reason"] for r in rejected)


def test_the_demo_recipe_runs_and_each_filter_drops_something(tmp_path):
    recipe = Path(__file__).parents[1] / "configs" / "demo.yaml"
    summary = Pipeline.from_recipe(str(recipe), {"export_path": str(tmp_path / "demo.jsonl")}).run(
        progress=False, log=lambda *a: None)
    assert summary["check"]["ok"] and summary["input"] == 100 and summary["rejected"] == 0
    assert 0 < summary["kept"] < 100
    for op in summary["ops"]:
        assert op["dropped"] > 0, op


def test_forked_workers_report_their_own_model_loads_not_the_parents(tmp_path):
    op = ImageTextSimilarityFilter(hf_clip=CLIP, min_score=-1.0)
    list(Pipeline(ops=[op]).process([{"text": "no images here"}]))  # loads CLIP in this process
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"text": f"sample {i} with words"}) + "\n" for i in range(40)))
    summary = Pipeline(process=[{"text_length_filter": {"min_len": 3}}], np=2, batch_size=8,
                       start_method="fork").run(str(data), str(tmp_path / "out/k.jsonl"), progress=False,
                                                log=lambda *a: None)
    assert summary["model_loads"] and all(loads == {} for loads in summary["model_loads"].values())
    assert summary["max_model_loads_per_process"] == 0
