"""What a run says about a plug-in's model before it starts: the Hugging Face cache and hub are
mentioned only for djx's Hugging Face loaders, never for a loader of the plug-in's own."""
from __future__ import annotations

from djx import ModelSpec, register_model_loader
from djx.core.op.registry import load_builtin_ops
from djx.core.plan.preflight import hub_notes, model_report


@register_model_loader("tmn_toy_model", estimate=lambda spec: 1000)
def _load_toy(spec, device):
    return object()


def test_a_plugin_loader_s_model_gets_no_hugging_face_cache_note(monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    spec = ModelSpec("tmn_toy_model", "default")
    assert hub_notes([spec]) == []
    lines, problems = model_report([spec])
    assert lines == ["model tmn_toy_model:default:float32: default, loaded by the 'tmn_toy_model' loader "
                     "(not checked here)"] and problems == []
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert model_report([ModelSpec("tmn_toy_model", "./weights/toy.bin")]) == (
        ["model tmn_toy_model:toy.bin:float32: ./weights/toy.bin, loaded by the 'tmn_toy_model' loader "
         "(not checked here)"], [])


def test_a_hugging_face_loader_s_uncached_hub_id_still_gets_the_note(monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    load_builtin_ops()
    (note,) = hub_notes([ModelSpec("hf_clip", "no-such-org/tmn-no-such-model")])
    assert "model no-such-org/tmn-no-such-model is not in the local Hugging Face cache" in note
