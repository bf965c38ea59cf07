"""`scoring: device` on the Ray executor: the stage actors of the image-text filters prepare on
CPUs and load no weights, scoring actors (one per node here: the test cluster has no GPU) score
and join the batches of different stage actors into shared forwards. The results are those of the
local engine with `scoring: workers`, also when a scoring actor is killed mid-run (Ray restarts it
and the stage actors call again)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from djx import Pipeline
from conftest import read_jsonl_file
from test_scoring_device import DEMO, MODELS, OPS  # the same ops: CLIP, BLIP, and the aesthetics op without the split

pytestmark = [pytest.mark.ray, pytest.mark.slow, pytest.mark.models]

# a plug-in that kills the run's scoring actor (Ray restarts it) once, on the batch holding `at`;
# it has no model, so it runs in a stage of its own
KILLER = '''
import os
from djx import Mapper, register_op


@register_op("scorer_killer")
class ScorerKiller(Mapper):
    def __init__(self, at: str = "", marker: str = "", **common):
        super().__init__(**common)
        self.at, self.marker = at, marker

    def process(self, batch):
        if not any(s.get("id") == self.at for s in batch.samples):
            return
        try:
            fd = os.open(self.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)  # once, whichever actor gets there
        except FileExistsError:
            return
        import ray
        for actor in ray.util.list_named_actors(all_namespaces=True):
            if actor["name"].startswith("djx-scorer-"):
                ray.kill(ray.get_actor(actor["name"], namespace=actor["namespace"]), no_restart=False)
                os.write(fd, (actor["name"] + "\\n").encode())
        os.close(fd)
'''


def run(tmp_path, name, **keys) -> tuple[dict, dict]:
    recipe = {"dataset_path": str(DEMO), "export_path": str(tmp_path / name / "o.jsonl"), "np": 2,
              "batch_size": 8, "process": OPS, **keys}
    summary = Pipeline(**recipe).run(progress=False, log=lambda *a: None)
    out = {kind: read_jsonl_file(tmp_path / name / f"o{suffix}.jsonl")
           for kind, suffix in (("kept", ""), ("dropped", ".dropped"), ("rejected", ".rejected"))}
    return summary, out


def live_scoring_actors(address: str) -> list:
    """Names of the scoring actors alive in the cluster, asked from a process of its own (this one
    never stays connected to Ray: see conftest.ray_address)."""
    code = ("import logging, sys, ray; ray.init(address=sys.argv[1], logging_level=logging.ERROR); "
            "print([a['name'] for a in ray.util.list_named_actors(all_namespaces=True) "
            "if a['name'].startswith('djx-scorer-')])")
    out = subprocess.run([sys.executable, "-c", code, address], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "RAY_AUTH_MODE": "disabled"}, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1].replace("'", '"'))


def assert_same_results(got: dict, ref: dict) -> None:
    """The same kept, dropped and rejected samples (kept in input order; the others in the order
    each engine wrote them, so by id) with the same stats within 1e-6."""
    for kind in ("kept", "dropped", "rejected"):
        a, b = got[kind], ref[kind]
        if kind != "kept":
            a, b = (sorted(x, key=lambda r: str(r.get("id", r.get("__dj__pos__")))) for x in (a, b))
        assert [json.dumps(r.get("id", r), sort_keys=True) for r in a] == \
               [json.dumps(r.get("id", r), sort_keys=True) for r in b], kind
        for x, y in zip(a, b):
            assert x.get("__dj__stats__", {}).keys() == y.get("__dj__stats__", {}).keys()
            for key, value in y.get("__dj__stats__", {}).items():
                assert x["__dj__stats__"][key] == pytest.approx(value, abs=1e-6), key


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The local engine with `scoring: workers`."""
    return run(tmp_path_factory.mktemp("ref"), "local", start_method="fork")


def test_ray_scoring_device_gives_the_local_results_with_no_weights_in_the_stage_actors(
        ray_address, tmp_path, reference):
    ref, ref_out = reference
    got, out = run(tmp_path, "ray", executor="ray", ray_address=ray_address, scoring="device")
    assert_same_results(out, ref_out)
    assert got["check"]["ok"] and (got["kept"], got["dropped"], got["rejected"]) == \
        (ref["kept"], ref["dropped"], ref["rejected"])
    # the stage actors of CLIP and BLIP prepared only; the aesthetics op (no prepare/score split)
    # still loads its model in its own stage actors
    loads = got["model_loads"]
    assert loads and not any("clip" in label or "blip" in label for w in loads.values() for label in w), loads
    assert any("aesthetics" in label for w in loads.values() for label in w), loads
    assert got["events"]["forwards"] > 0
    # the scorer's busy share: of its time from its first call to its last, so at most all of it
    # (over the processing time, which starts when a batch enters its last stage, it was 1.7x and more)
    phases = got["time_breakdown"]["ops"]
    busy, span = (sum(p.get(k, 0.0) for p in phases.values()) for k in ("scorer_busy", "scorer_span"))
    assert 0 < busy <= span and 0 < got["time_breakdown"]["scorer_busy_share"] <= 1
    assert live_scoring_actors(ray_address) == []  # the run killed its scoring actors


def test_a_killed_scoring_actor_is_restarted_and_the_run_gives_the_same_results(ray_address, tmp_path, reference):
    _, ref_out = reference
    (tmp_path / "killer.py").write_text(KILLER)
    # after CLIP: while later batches still wait for CLIP and BLIP
    ops = OPS[:2] + [{"scorer_killer": {"at": ref_out["kept"][len(ref_out["kept"]) // 2]["id"],
                                        "marker": str(tmp_path / "killed")}}] + OPS[2:]
    got, out = run(tmp_path, "ray", executor="ray", ray_address=ray_address, scoring="device", process=ops,
                   custom_ops=[str(tmp_path / "killer.py")])
    assert "djx-scorer-" in (tmp_path / "killed").read_text()  # the killer found the scoring actor
    assert_same_results(out, ref_out)
    assert got["check"]["ok"]
    assert got["events"].get("scorer_restarts", 0) >= 1, got["events"]  # the restarted actor scored
    assert not got["events"].get("actor_deaths")  # the stage actors waited for it; none died


def test_the_dry_run_says_where_ray_prepares_and_scores(tmp_path, capsys):
    from djx.cli import main
    recipe = tmp_path / "r.yaml"
    recipe.write_text(json.dumps({"dataset_path": str(DEMO), "export_path": str(tmp_path / "o.jsonl"),
                                  "executor": "ray", "scoring": "device", "process": OPS}))
    main(["process", str(recipe), "--dry-run"])
    line = next(x for x in capsys.readouterr().out.splitlines() if "scoring: device" in x)
    assert "stage actors prepare on CPUs" in line and "image_text_similarity_filter" in line
    assert "image_text_matching_filter" in line and "one per GPU" in line
    assert "image_aesthetics_filter score in their stage actors" in line


GONE = """
import logging, sys, ray
from djx.core.errors import DjxError
from djx.core.executors.ray.scorers import RayScoreClient
ray.init(address=sys.argv[1], logging_level=logging.ERROR)

@ray.remote(num_cpus=0)
class Scorer:
    def submit(self, request):
        return ("scores", [], {})

handle = Scorer.remote()
assert ray.get(handle.submit.remote(None)) == ("scores", [], {})
ray.kill(handle, no_restart=True)  # dead for good: no restart will answer
client = RayScoreClient([(ray.get_runtime_context().get_node_id(), handle)], connect_seconds=1.0)
try:
    client.score("an op", "prepared pairs")
except DjxError as e:
    print(e)
"""


def test_a_scoring_actor_that_stays_dead_fails_the_call_in_words(ray_address, tmp_path):
    out = subprocess.run([sys.executable, "-c", GONE, ray_address], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "RAY_AUTH_MODE": "disabled"}, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    message = out.stdout.strip().splitlines()[-1]
    assert "the Ray scoring actor did not answer for 1 s" in message, out.stdout
    assert "killed by `ray.kill`" in message  # Ray's reason, on the same line


JOIN = """
import json, logging, sys, threading, dill, ray
from djx import Pipeline
from djx.core.executors.ray.scorers import RayScorers
from djx.core.models.pool import ModelPool
from djx.core.records import Item
ray.init(address=sys.argv[1], logging_level=logging.ERROR)
demo, clip, n = sys.argv[2], sys.argv[3], int(sys.argv[4])
records = [json.loads(line) for line in open(demo, encoding="utf-8")][:4 * n]
chain = Pipeline(dataset_path=demo, export_path="o.jsonl",
                 process=[{"image_text_similarity_filter": {"hf_clip": clip, "min_score": 0.2}}]).chain()
for r in records:  # the images as absolute paths
    r["images"] = [str(__import__("pathlib").Path(demo).parent / p) for p in r["images"]]
batches = [[Item(i, record=r) for i, r in enumerate(records[4 * k:4 * k + 4], 4 * k)] for k in range(n)]
scorers = RayScorers(chain.ops, [(0, 1, frozenset(chain.ops[0].model_specs()))], 1, (), ".")
client = scorers.start(ray, n)
results, pools, chains = [None] * n, [ModelPool("cpu", scoring="device") for _ in range(n)], []
for pool in pools:  # n stage actors, each with its chain, its processor (made here, one at a time) and the client
    pool.use_scorer(client)
    chains.append(dill.loads(dill.dumps(chain)))
    chains[-1].ops[0].host_side(pool)

def one(k):  # one stage actor's batch, prepared here, scored by the fresh scoring actor
    results[k] = chains[k].run(batches[k], pools[k])

threads = [threading.Thread(target=one, args=(k,)) for k in range(n)]
for t in threads:
    t.start()
for t in threads:
    t.join()
scorers.stop(ray)
here = chain.run([item for batch in batches for item in batch], ModelPool("cpu"))  # scored in this process
stats = lambda res: {s["id"]: s["__dj__stats__"] for s in res.kept + res.dropped}
print(json.dumps({"joined": sum(r.counters.get("joined_batches", 0) for r in results),
                  "apart": {k: v for r in results for k, v in stats(r).items()}, "here": stats(here)}))
"""


def test_batches_of_concurrent_callers_are_joined_in_the_scoring_actor(ray_address, tmp_path):
    """Calls sent to a scoring actor still starting up wait in Ray, reach it together and are
    scored in shared forwards (the first one loads the model meanwhile), with the scores of a run
    that scores in its own process."""
    out = subprocess.run([sys.executable, "-c", JOIN, ray_address, str(DEMO), str(MODELS / "tiny-clip"), "6"],
                         capture_output=True, text=True, timeout=300, cwd=tmp_path,
                         env={**os.environ, "RAY_AUTH_MODE": "disabled"})
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert 2 <= got["joined"] <= 6, got["joined"]
    assert got["apart"].keys() == got["here"].keys() and len(got["here"]) == 24
    for key, stats in got["here"].items():
        for name, value in stats.items():
            assert got["apart"][key][name] == pytest.approx(value, abs=1e-6), (key, name)
