"""An op's `ready_parts` (device work before the forwards, e.g. `image_decode: device`'s JPEG
decode) runs on the scorer's gathering thread, with the scorer's one loaded copy of the model,
before that group's forwards; the phases it times reach the request's counters."""
import threading
from pathlib import Path
from types import SimpleNamespace

import dill

from djx import ModelSpec
from djx.core.models.share.score_client import ScoreRequest
from djx.core.models.share.scoring import Scorer
from djx.core.op.registry import load_builtin_ops

CLIP = str(Path(__file__).resolve().parents[1] / "assets" / "models" / "tiny-clip")


class ReadiedOp:
    spec = ModelSpec("hf_clip", CLIP)

    def assemble_parts(self, parts):
        return {"pairs": [pair for p in parts for pair in p.pairs]}

    def ready_parts(self, loaded, joined, counters):
        joined["ready"] = (threading.current_thread().name, id(loaded.model))
        counters["time.device_decode"] = counters.get("time.device_decode", 0.0) + 0.25

    def score_parts(self, loaded, parts, fault, counters):
        readied_on, model = parts.assembled["ready"]
        return [[(readied_on, model == id(loaded.model))] * len(p.pairs) for p in parts]


def test_ready_parts_runs_on_the_gathering_thread_with_the_scorers_model_before_the_forwards():
    load_builtin_ops()  # the model loaders register with the ops
    scorer = Scorer("cpu")
    request = ScoreRequest("readied", dill.dumps(ReadiedOp()), SimpleNamespace(pairs=[(0, 0), (1, 1)]))
    kind, scores, counters = scorer.submit(request)
    assert kind == "scores", scores
    assert scores == [("djx-scorer-gather", True)] * 2  # readied there, with the model the forwards use
    assert counters["time.device_decode"] == 0.25 and counters["time.assemble"] >= 0.0
    assert counters["scorer_pairs"] == 2
