"""`scoring: device` on Ray: the stage actors prepare on CPUs, scoring actors score.

A stage whose every model op can score in its device's scorer (score_client.takes_part) runs on
CPUs and loads no weights: its actors prepare (decode, the model's processor and tokenizer) and
send the prepared tensors, through Ray's object store, to a scoring actor. The scoring actors are
sized from the cluster when the run starts: one per GPU (pinned to the GPU's node; num_gpus=1, or
the scored stages' share of it where other stages still score on the GPU themselves), or
on a cluster without GPUs one per alive node (device cpu, the plan's torch threads of one worker).
Each wraps the local engine's Scorer (models/share/scoring.py) and takes concurrent calls (a
threaded actor), so requests of the same op from different stage actors join into one set of
forwards. A stage actor asks a scoring actor on its own node (any, where its node has none).

A scoring actor that dies is restarted by Ray; a stage actor whose call met the death calls again
until CONNECT_SECONDS have passed, then fails in words. Scoring has no side effect: the driver's
ledger alone decides what is written (exactly once). The run kills its scoring actors at its end.
"""
from __future__ import annotations

import hashlib
import os
import sys
import time
import uuid
import warnings

from djx.core.errors import DjxError
from djx.core.models.share.score_client import CONNECT_SECONDS, ScoreClient, ScoreRequest, takes_part

MAX_RESTARTS = 10  # deaths of one scoring actor that Ray restarts it after
LANES = 3  # batches a stage actor that only prepares works on at once (as a local worker's lanes)


def prepare_only_stages(ops: list, groups: list) -> frozenset:
    """Indices of the stages (stage_groups) with models, all of whose model ops take part."""
    return frozenset(s for s, (first, last, specs) in enumerate(groups)
                     if specs and all(takes_part(op) for op in ops[first:last] if op.model_specs()))


def describe(ops: list, groups: list) -> str:
    """The plan's line (a run's start, a dry run) on where preparing and scoring run."""
    stages = prepare_only_stages(ops, groups)
    names = [op.name for s in sorted(stages) for op in ops[groups[s][0]:groups[s][1]] if op.model_specs()]
    if not names:
        return "scoring: device: no model op of this recipe can score apart: each stage actor scores its own"
    rest = [op.name for s, (first, last, specs) in enumerate(groups) if specs and s not in stages
            for op in ops[first:last] if op.model_specs()]
    return ("scoring: device: stage actors prepare on CPUs and load no weights for " + ", ".join(names)
            + "; scoring actors score them: one per GPU of the cluster (one per alive node, on its CPUs, "
              "where the cluster has no GPU), counted when the run joins Ray"
            + (f"; {', '.join(rest)} score in their stage actors (no prepare/score split)" if rest else ""))


class ScoringActor:
    """One scoring actor: the plug-ins loaded, the device bound, a Scorer (its joining thread)."""

    def __init__(self, device: str, threads: int, custom_ops: tuple, base_dir: str, sys_path: list):
        entered = time.time()  # the start-up's instants, which a warm-up's answer carries (startup_parts)
        from djx.core.executors.process import set_thread_env
        set_thread_env(threads)  # before anything imports torch
        import ray
        import torch

        from djx.core.models.share.scoring import Scorer
        from djx.core.op.registry import load_run_ops
        torch.set_num_threads(threads)
        if device.startswith("cuda"):
            torch.cuda.set_device(device)
        load_run_ops(custom_ops, base_dir, sys_path)  # first: unpickling an op needs its class, a model its loader
        with warnings.catch_warnings():  # Ray's property reads its own deprecated actor_id
            warnings.simplefilter("ignore")
            self._restarted = ray.get_runtime_context().was_current_actor_reconstructed
        self._scorer = Scorer(device, timeline={"scorer_entered_at": entered, "scorer_imported_at": time.time()})

    def submit(self, request: ScoreRequest) -> tuple:
        """Scorer.submit's answer; the first after a restart counts it (scorer_restarts)."""
        answer = self._scorer.submit(request)
        if self._restarted and answer[0] == "scores" and request.prepared is not None:  # not a warm-up
            self._restarted = False
            answer = (answer[0], answer[1], {**answer[2], "scorer_restarts": 1})
        return answer

    def pid(self) -> int:
        return os.getpid()


class RayScoreClient(ScoreClient):
    """A stage actor's line to the scoring actors: ScoreClient's interface over Ray calls."""

    def __init__(self, scorers: list, connect_seconds: float = CONNECT_SECONDS):
        super().__init__(None, "ray", connect_seconds)
        self.scorers = scorers  # [(node id, actor handle)]
        self._mine = None

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_mine": None, "_ops": {}}

    def _pick(self):
        """A scoring actor on this process's node (the same one for every call), else any."""
        if self._mine is None:
            import ray
            ctx = ray.get_runtime_context()
            here = [h for node, h in self.scorers if node == ctx.get_node_id()] or [h for _, h in self.scorers]
            me = ctx.get_actor_id() or str(os.getpid())
            self._mine = here[int(hashlib.sha1(me.encode()).hexdigest(), 16) % len(here)]
        return self._mine

    def _exchange(self, op, prepared, fault) -> tuple:
        import ray
        ref = ray.put(self.request(op, prepared, fault))  # once: a retry sends the same object
        deadline, last = time.monotonic() + self.connect_seconds, None
        while time.monotonic() < deadline:
            try:
                with self.waiting():  # the stage actor's other lanes prepare meanwhile
                    return ray.get(self._pick().submit.remote(ref))
            except ray.exceptions.RayActorError as e:  # died (Ray restarts it) or unreachable for now
                last = e
                with self.waiting():
                    time.sleep(0.1)
        said = [line.strip() for line in str(last).splitlines() if line.strip()]
        why = " ".join(dict.fromkeys(said[:1] + said[-1:]))  # Ray's first line and its reason, on one line
        raise DjxError(f"the Ray scoring actor did not answer for {self.connect_seconds:g} s (it died and "
                       f"was not back in time; last: {type(last).__name__}: {why})")


class RayScorers:
    """The scoring actors of one Ray run: started by the driver, killed at the run's end."""

    def __init__(self, ops: list, groups: list, threads: int, custom_ops: tuple, base_dir: str,
                 use_gpus: bool = True):
        self.stages = prepare_only_stages(ops, groups)
        self.use_gpus = use_gpus  # False: the recipe lists only cpu devices
        # of each GPU, the share the scored stages had (stages that score themselves keep theirs:
        # their actors ask 1/(workers per GPU x model stages) each, executor._stage_args); whole
        # when every model stage is scored here; cut at Ray's 1e-4 so that shares never sum over 1
        n_model_stages = sum(1 for _, _, specs in groups if specs) or 1
        self.gpu_share = int(len(self.stages) / n_model_stages * 10000) / 10000
        self.threads, self.custom_ops, self.base_dir = threads, custom_ops, base_dir
        self.handles: list = []  # [(node id, handle)]

    def actor_specs(self, groups: list) -> list:
        """The models the stage actors load (those of the stages that score themselves)."""
        return list(dict.fromkeys(spec for s, (_, _, specs) in enumerate(groups) if s not in self.stages
                                  for spec in specs))

    def start(self, ray, stage_actors: int) -> RayScoreClient:
        """One scoring actor per GPU, else per alive node, each taking calls from `stage_actors`
        stage actors at once; the client the stage actors use."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
        nodes = [n for n in ray.nodes() if n.get("Alive")]
        gpus = {n["NodeID"]: int(n.get("Resources", {}).get("GPU", 0)) for n in nodes}
        on_gpu = self.use_gpus and any(gpus.values())
        actor = ray.remote(ScoringActor)
        run = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
        for node, n_gpus in gpus.items():
            for i in range(n_gpus if on_gpu else 1):
                opts = {"num_cpus": 0, "num_gpus": self.gpu_share if on_gpu else 0, "max_restarts": MAX_RESTARTS,
                        "max_task_retries": 0, "max_concurrency": 2 * stage_actors + 4,  # every stage actor, replacements too
                        "name": f"djx-scorer-{run}-{node[:8]}-{i}",
                        "scheduling_strategy": NodeAffinitySchedulingStrategy(node, soft=False)}
                handle = actor.options(**opts).remote("cuda:0" if on_gpu else "cpu", self.threads,
                                                      tuple(self.custom_ops), self.base_dir,
                                                      [p for p in sys.path if p])
                self.handles.append((node, handle))
        if not self.handles:
            raise DjxError("scoring: device: the Ray cluster has no alive node to run a scoring actor on")
        return RayScoreClient(list(self.handles))

    def stop(self, ray) -> None:
        """Kill the scoring actors and see them dead (a later run in this process finds none)."""
        for _, handle in self.handles:
            try:
                ray.kill(handle, no_restart=True)
            except Exception:  # noqa: BLE001  (gone already, or Ray is going down)
                pass
        for _, handle in self.handles:
            try:  # answers once Ray knows it dead: a call to a killed actor fails
                ray.get(handle.pid.remote(), timeout=30)
            except Exception:  # noqa: BLE001  (ActorDiedError, as expected)
                pass
        self.handles = []
