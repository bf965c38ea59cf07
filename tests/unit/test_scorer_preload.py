"""A device's scorer loads the models it will score with as soon as it starts (the executor names
them), while the workers start, instead of when the first worker asks."""
import threading
from pathlib import Path

from djx import ModelSpec
from djx.core.models.share.scoring import Scorer
from djx.core.op.registry import load_builtin_ops

CLIP = str(Path(__file__).resolve().parents[1] / "assets" / "models" / "tiny-clip")


def test_the_scorer_loads_its_models_before_any_request():
    load_builtin_ops()  # the model loaders register with the ops
    spec = ModelSpec("hf_clip", CLIP)
    scorer = Scorer("cpu", (spec, ModelSpec("hf_clip", "/no/such/model")))  # a failure is left to the request
    tick = threading.Event()
    for _ in range(12000):  # a state, no request made (the count only guards against a hang)
        if spec in scorer._models:
            break
        tick.wait(0.01)
    assert scorer._models[spec].model.config.model_type == "clip"
