"""The plug-in examples the README and docs/plugins.md show, taken from those files, run as a user
would run them."""
from __future__ import annotations

import json
import re

import pytest
import torch
from PIL import Image
from transformers import AutoProcessor, CLIPModel

from djx import Pipeline

from conftest import REPO_DIR, read_jsonl_file

README = (REPO_DIR / "README.md").read_text(encoding="utf-8")
PLUGINS_DOC = (REPO_DIR / "docs" / "plugins.md").read_text(encoding="utf-8")
DEMO = REPO_DIR / "tests" / "assets" / "demo"
TINY_CLIP = REPO_DIR / "tests" / "assets" / "models" / "tiny-clip"


def readme_block(first_line: str, text: str = README) -> str:
    """The ```python block of `text` (the README) that starts with `first_line`."""
    blocks = re.findall(r"```python\n(.*?)```", text, re.DOTALL)
    found = [b for b in blocks if b.startswith(first_line + "\n")]
    assert len(found) == 1, f"no single python block starting with {first_line!r}"
    return found[0]


def test_the_docs_show_the_readme_plugin_as_it_is():
    assert readme_block("# my_ops.py", PLUGINS_DOC) == readme_block("# my_ops.py")


@pytest.mark.spawn
def test_the_readme_word_count_plugin_runs_from_a_recipe(tmp_path, write_recipe):
    (tmp_path / "my_ops.py").write_text(readme_block("# my_ops.py"))
    texts = ["one two three four", "too short", "a b c", "nul \x00 in here ok", "fine text with words"]
    (tmp_path / "in.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    recipe = write_recipe(tmp_path / "r.yaml", dataset_path="in.jsonl", export_path="out/kept.jsonl",
                          np=2, start_method="spawn", custom_ops=["my_ops.py"],
                          process=[{"word_count_filter": {"min_words": 3}}])
    summary = Pipeline.from_recipe(str(recipe)).run(progress=False, log=lambda *a: None)
    kept = read_jsonl_file(tmp_path / "out" / "kept.jsonl")
    assert [k["text"] for k in kept] == ["one two three four", "a b c", "fine text with words"]
    assert [k["__dj__stats__"]["num_words"] for k in kept] == [4, 3, 4]
    rejected = read_jsonl_file(tmp_path / "out" / "kept.rejected.jsonl")
    assert [r["record"]["text"] for r in rejected] == [texts[3]] and "NUL" in rejected[0]["reason"]
    assert (summary["kept"], summary["dropped"], summary["rejected"]) == (3, 1, 1)
    assert rejected[0]["code"] == "bad_text"
    dropped = read_jsonl_file(tmp_path / "out" / "kept.dropped.jsonl")
    assert dropped[0]["__dj__drop__"]["reason"] == "num_words=2 below min_words 3"


def reference_prompt_scores(images: list[Image.Image], prompts: list[str]) -> list[float]:
    """Plain transformers: max over prompts of the cosine between CLIP image and text features."""
    model = CLIPModel.from_pretrained(TINY_CLIP).eval()
    proc = AutoProcessor.from_pretrained(TINY_CLIP)
    with torch.no_grad():
        inputs = proc(text=prompts, images=images, return_tensors="pt", padding=True)
        out = model(**inputs)
        return (out.image_embeds @ out.text_embeds.T).max(dim=1).values.tolist()


@pytest.fixture(scope="module")
def prompt_plugin(tmp_path_factory) -> str:
    """docs/plugins.md's image_prompt_ops.py, written once: a plug-in file is imported once per
    process, and its op's name registers once."""
    path = tmp_path_factory.mktemp("plugin") / "image_prompt_ops.py"
    path.write_text(readme_block("# image_prompt_ops.py", PLUGINS_DOC))
    return str(path)


@pytest.mark.slow
@pytest.mark.spawn
@pytest.mark.models
def test_the_readme_model_plugin_shares_clip_with_the_builtin_filter(tmp_path, write_recipe, prompt_plugin):
    prompts = ["a red circle on a white background", "a blue square on a black background"]
    recipe = write_recipe(
        tmp_path / "r.yaml", dataset_path=str(DEMO / "demo.jsonl"), export_path="out/kept.jsonl",
        np=2, start_method="spawn", custom_ops=[prompt_plugin],
        process=[{"image_text_similarity_filter": {"hf_clip": str(TINY_CLIP), "min_score": -1.0}},
                 {"image_prompt_filter": {"hf_clip": str(TINY_CLIP), "prompts": prompts, "min_score": -1.0}}])
    summary = Pipeline.from_recipe(str(recipe)).run(progress=False, log=lambda *a: None)
    assert summary["check"]["ok"] and summary["kept"] + summary["rejected"] == summary["input"] == 100
    # two ops, one model: one copy per worker
    assert summary["max_model_loads_per_process"] == 1
    assert all(list(loads) == ["hf_clip:tiny-clip:float32"] for loads in summary["model_loads"].values())

    kept = read_jsonl_file(tmp_path / "out" / "kept.jsonl")
    multi = [k for k in kept if len(k.get("images", [])) > 1][:3]
    single = [k for k in kept if len(k.get("images", [])) == 1][:5]
    assert multi and single
    for k in multi + single:
        images = [Image.open(DEMO / ref).convert("RGB") for ref in k["images"]]
        expected = reference_prompt_scores(images, prompts)
        assert k["__dj__stats__"]["image_prompt_score"] == pytest.approx(expected, abs=1e-5)


@pytest.mark.slow
@pytest.mark.models
def test_the_model_plugins_stats_are_computed_again_when_its_image_changes(tmp_path, write_recipe, prompt_plugin):
    """The docs' image_prompt_filter reads images: a re-run on its export reuses its stats only for
    an unchanged image, and an image given as a single path string is read as one image."""
    import shutil
    photos = sorted(p for p in DEMO.rglob("*.png"))[:2] or sorted(p for p in DEMO.rglob("*.jpg"))[:2]
    for k, photo in enumerate(photos):
        shutil.copy(photo, tmp_path / f"p{k}{photo.suffix}")
    names = [f"p{k}{photo.suffix}" for k, photo in enumerate(photos)]
    (tmp_path / "in.jsonl").write_text("".join(json.dumps({"text": "x", "images": name}) + "\n" for name in names))
    op = {"image_prompt_filter": {"hf_clip": str(TINY_CLIP), "prompts": ["a red circle"], "min_score": -1.0}}
    first = write_recipe(tmp_path / "a.yaml", dataset_path="in.jsonl", export_path="a/o.jsonl", np=1,
                         custom_ops=[prompt_plugin], process=[op])
    assert Pipeline.from_recipe(str(first)).run(progress=False, log=lambda *a: None)["kept"] == 2
    before = [r["__dj__stats__"]["image_prompt_score"] for r in read_jsonl_file(tmp_path / "a" / "o.jsonl")]
    assert all(len(s) == 1 for s in before)  # one image each, not one per character of its path
    Image.open(photos[1]).transpose(Image.Transpose.ROTATE_90).save(tmp_path / names[0])  # the first changes
    again = write_recipe(tmp_path / "b.yaml", dataset_path="a/o.jsonl", export_path="b/o.jsonl", np=1,
                         custom_ops=[prompt_plugin], process=[op])
    summary = Pipeline.from_recipe(str(again)).run(progress=False, log=lambda *a: None)
    after = [r["__dj__stats__"]["image_prompt_score"] for r in read_jsonl_file(tmp_path / "b" / "o.jsonl")]
    assert summary["ops"][0]["reused_stats"] == 1 and after[1] == before[1] and after[0] != before[0]


def readme_commands(heading: str) -> list[list[str]]:
    """The `djx` commands of the README's ```bash block under `heading`, comments left out."""
    import shlex
    section = README.split(heading, 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.DOTALL).group(1)
    lines = [line.split("#", 1)[0].strip() for line in block.splitlines()]
    return [shlex.split(line)[1:] for line in lines if line.startswith("djx ")]


@pytest.mark.slow
def test_the_readme_trial_and_analysis_commands_run_in_order_after_the_demo(tmp_path, monkeypatch, djx_cli):
    """A new user's session: the demo (the README's first command), then the trial-run block as typed."""
    import shutil
    shutil.copytree(REPO_DIR / "configs", tmp_path / "configs")
    (tmp_path / "tests").symlink_to(REPO_DIR / "tests")  # the demo's data and models, read only
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("BROWSER", "true")  # --open: a browser command that returns at once
    first = re.search(r"&& (djx process configs/demo\.yaml)\n", README).group(1).split()[1:]
    assert djx_cli(*first).rc == 0
    commands = readme_commands("## Trial runs and the analysis")
    assert [c[0] for c in commands] == ["process", "process", "analyze", "explain"]
    for command in commands:
        res = djx_cli(*command)
        assert res.rc == 0, (command, res.err)
    full = json.loads((tmp_path / "outputs" / "demo" / "demo.summary.json").read_text())
    trial = json.loads((tmp_path / "outputs" / "trial" / "demo.summary.json").read_text())
    assert (full["input"], full["partial"]) == (100, False) and (trial["input"], trial["partial"]) == (40, True)
