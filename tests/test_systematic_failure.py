"""A run that fails for (nearly) every sample stops with one message instead of exiting 0 with an
export of rejections; a run with a few bad samples finishes, shows its rejected share, and
`max_rejected_fraction` makes too many rejections a failed run. Slow dtypes are said up front."""
import json
from pathlib import Path

import pytest

from djx.core.models.dtypes import cpu_flags
from djx.tools.make_demo_data import write_demo

from conftest import read_jsonl_file

PLUGINS = Path(__file__).parent / "plugins"
CLIP = str(Path(__file__).parent / "assets" / "models" / "tiny-clip")


def write_lines(path: Path, records) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_an_op_that_raises_for_every_sample_stops_the_run_early_and_writes_no_export(tmp_path, write_recipe,
                                                                                     djx_cli):
    data = write_lines(tmp_path / "d.jsonl", [{"id": i, "text": f"sample number {i}", "boom": True}
                                              for i in range(400)])
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path=str(data), export_path="out/kept.jsonl", np=1,
                          batch_size=8, custom_ops=[str(PLUGINS / "chaos_ops.py")],
                          process=[{"text_length_filter": {"min_len": 1}}, {"poison_filter": {"how": "kill"}}])
    res = djx_cli("process", recipe, "--quiet")
    assert res.rc == 1
    assert "op poison_filter (process[1])" in res.err and "128 of the first 128" in res.err  # 4 windows of 32
    assert "ValueError" in res.err and "cannot handle" in res.err
    assert not (tmp_path / "out" / "kept.jsonl").exists()
    assert not (tmp_path / "out" / ".kept.djx-state").exists()  # nothing to resume from either
    assert "save progress" not in res.out + res.err and "resumes" not in res.out + res.err  # nor a word of it


@pytest.mark.slow
@pytest.mark.models
def test_the_token_check_counts_only_samples_that_reach_the_model_op(tmp_path, write_recipe, djx_cli):
    """Cheaper filters drop many of the first samples; the rest, all carrying images written with
    the default token, meet a run configured with another token."""
    write_demo(tmp_path / "d", n=100)
    lines = (tmp_path / "d" / "demo.jsonl").read_text().splitlines(keepends=True)
    (tmp_path / "d" / "three.jsonl").write_text("".join(lines * 3))
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path="d/three.jsonl", export_path="out/kept.jsonl",
                          np=1, batch_size=16, image_special_token="<image>",
                          process=[{"text_length_filter": {"min_len": 30}},
                                   {"image_shape_filter": {"min_width": 64, "min_height": 64}},
                                   {"image_text_similarity_filter": {"hf_clip": CLIP, "min_score": 0.2}}])
    res = djx_cli("process", recipe, "--quiet")
    assert res.rc == 1
    assert "op image_text_similarity_filter (process[2])" in res.err and "Check image_special_token" in res.err
    assert "'<image>'" in res.err
    assert not (tmp_path / "out" / "kept.jsonl").exists()


@pytest.mark.slow
@pytest.mark.models
def test_a_small_input_that_fails_throughout_is_judged_on_all_of_it(tmp_path, write_recipe, djx_cli, make_image):
    make_image("r.png", (64, 64))
    data = write_lines(tmp_path / "d.jsonl", [{"text": f"a red square number {i}", "images": ["r.png"]}
                                              for i in range(30)])  # written without any image token
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path=str(data), export_path="out/kept.jsonl", np=1,
                          process=[{"image_text_similarity_filter": {"hf_clip": CLIP}}])
    res = djx_cli("process", recipe, "--quiet")
    assert res.rc == 1 and "30 of the first 30" in res.err and "Check image_special_token" in res.err
    assert not (tmp_path / "out" / "kept.jsonl").exists()


def test_a_few_bad_samples_finish_the_run_and_max_rejected_fraction_fails_it_after_writing(tmp_path,
                                                                                           write_recipe, djx_cli):
    data = write_lines(tmp_path / "d.jsonl", [{"id": i, "text": f"sample number {i}", "boom": i % 20 == 3}
                                              for i in range(100)])
    keys = dict(dataset_path=str(data), np=1, batch_size=10, custom_ops=[str(PLUGINS / "chaos_ops.py")],
                process=[{"poison_filter": {"how": "kill"}}])
    ok = djx_cli("process", write_recipe(tmp_path / "a.yaml", export_path="a/kept.jsonl", **keys))
    assert ok.rc == 0, ok.err
    assert "rejected: 5.0% of the input (op_error 5)" in ok.out
    summary = json.loads((tmp_path / "a" / "kept.summary.json").read_text())
    assert summary["rejected_share"] == 0.05 and summary["rejected_by_code"] == {"op_error": 5}

    strict = djx_cli("process", write_recipe(tmp_path / "b.yaml", export_path="b/kept.jsonl",
                                             max_rejected_fraction=0.01, **keys), "--quiet")
    assert strict.rc == 1 and "5 of 100 samples (5.0%) were rejected" in strict.err
    assert "max_rejected_fraction 0.01" in strict.err
    assert len(read_jsonl_file(tmp_path / "b" / "kept.jsonl")) == 95  # the outputs are written
    assert len(read_jsonl_file(tmp_path / "b" / "kept.rejected.jsonl")) == 5


@pytest.mark.slow
@pytest.mark.models
@pytest.mark.parametrize("dtype", ["bfloat16", "auto"])
def test_dry_run_warns_of_an_emulated_dtype_and_auto_runs_float32_on_this_cpu(tmp_path, write_recipe,
                                                                              djx_cli, make_image, dtype):
    native = any(f in cpu_flags() for f in ("avx512_bf16", "amx_bf16"))
    make_image("r.png", (64, 64))
    data = write_lines(tmp_path / "d.jsonl", [{"text": f"<__dj__image> a red square {i}", "images": ["images/r.png"]}
                                              for i in range(4)])
    keys = dict(dataset_path=str(data), np=1, process=[{"image_text_similarity_filter": {
        "hf_clip": CLIP, "min_score": -1.0, "dtype": dtype}}])
    dry = djx_cli("process", write_recipe(tmp_path / "r.yaml", export_path="o/k.jsonl", **keys), "--dry-run")
    assert dry.rc == 0
    warned = [line for line in dry.out.splitlines() if line.startswith("warning: dtype bfloat16")]
    if dtype == "bfloat16":
        assert bool(warned) == (not native)
        if warned:
            assert "this CPU (no AVX-512 BF16 or AMX)" in warned[0] and "dtype: float32" in warned[0]
        return
    assert not warned  # auto never picks an emulated dtype
    auto = djx_cli("process", tmp_path / "r.yaml", "--quiet")
    f32 = djx_cli("process", write_recipe(tmp_path / "f.yaml", export_path="f/k.jsonl", **{
        **keys, "process": [{"image_text_similarity_filter": {"hf_clip": CLIP, "min_score": -1.0}}]}), "--quiet")
    assert auto.rc == f32.rc == 0
    scores = [[r["__dj__stats__"]["image_text_similarity"] for r in read_jsonl_file(p)]
              for p in (tmp_path / "o" / "k.jsonl", tmp_path / "f" / "k.jsonl")]
    if not native:
        assert scores[0] == scores[1]  # float32, bit for bit


@pytest.mark.slow
@pytest.mark.models
def test_a_wrong_image_key_is_named_not_blamed_on_the_token(tmp_path, write_recipe, djx_cli, make_image):
    make_image("r.png", (64, 64))
    data = write_lines(tmp_path / "d.jsonl", [{"text": f"<__dj__image> a red square {i}", "image": ["r.png"]}
                                              for i in range(40)])  # "image", not the default "images"
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path=str(data), export_path="out/kept.jsonl", np=1,
                          process=[{"image_text_similarity_filter": {"hf_clip": CLIP}}])
    res = djx_cli("process", recipe, "--quiet")
    assert res.rc == 1 and "has images under image_key 'images'" in res.err and "Check image_key" in res.err
    assert "image_special_token" not in res.err
    assert not (tmp_path / "out" / "kept.jsonl").exists()


def _boom_head(tmp_path, bad: int, good: int):
    return write_lines(tmp_path / "d.jsonl", [{"text": f"bad {i}", "boom": True} for i in range(bad)]
                       + [{"text": f"good sample {i}"} for i in range(good)])


@pytest.mark.slow
@pytest.mark.parametrize("batch_size", [1, 7, 50, 500])
def test_bad_records_at_the_head_of_a_good_dataset_do_not_stop_it_whatever_the_batches(tmp_path, write_recipe,
                                                                                       djx_cli, batch_size):
    data = _boom_head(tmp_path, 70, 3000)
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path=str(data), export_path="out/kept.jsonl", np=1,
                          batch_size=batch_size, custom_ops=[str(PLUGINS / "chaos_ops.py")],
                          process=[{"poison_filter": {"how": "kill"}}])
    res = djx_cli("process", recipe, "--quiet")
    assert res.rc == 0, res.err
    summary = json.loads((tmp_path / "out" / "kept.summary.json").read_text())
    assert summary["kept"] == 3000 and summary["rejected_by_code"] == {"op_error": 70}


@pytest.mark.parametrize("batch_size", [7, 500])
def test_a_dataset_failing_throughout_stops_after_the_same_samples_whatever_the_batches(tmp_path, write_recipe,
                                                                                        djx_cli, batch_size):
    data = _boom_head(tmp_path, 1000, 0)
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path=str(data), export_path="out/kept.jsonl", np=1,
                          batch_size=batch_size, custom_ops=[str(PLUGINS / "chaos_ops.py")],
                          process=[{"poison_filter": {"how": "kill"}}])
    res = djx_cli("process", recipe, "--quiet")
    assert res.rc == 1 and "128 of the first 128 samples" in res.err
    assert not (tmp_path / "out" / "kept.jsonl").exists()
    # turned off: the run goes to the end, writes its outputs, and still does not claim success
    res = djx_cli("process", recipe, "--quiet", "--set", "stop_on_systematic_failure=false")
    assert res.rc == 1 and "1000 of 1000 samples (100.0%) were rejected as op_error" in res.err
    assert (tmp_path / "out" / "kept.rejected.jsonl").exists()
