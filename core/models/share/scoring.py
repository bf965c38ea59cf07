"""Scoring in one place per device (recipe key `scoring: device`): the owner's side.

The workers prepare (read, decode, the model's processor and tokenizer: on every core) and send
the prepared tensors of each batch to the weight owner of their device, which holds the one copy
of the model there and scores. An op takes part by having `host_side(pool)` (what it prepares
with, made at the worker's start), `prepare` (in the worker, its own signature) and
`score_parts(loaded, parts, fault, counters)`: one list of scores per prepared part, scored
together. The owner's scoring thread takes every request waiting for the same op at that moment,
joins them up to a forward budget, scores them in one set of forwards and hands each worker its
own scores: batches from different workers share forwards, and the device has one process (on a
GPU, one CUDA context) using it.

A worker whose request meets a dead owner (killed, crashed) retries until the executor has
restarted it at the same address; scoring has no side effect, so a retried request gives the same
scores, and the run's ledger, not the scorer, decides what is written (exactly once).
"""
from __future__ import annotations

import pickle
import queue
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field

from djx.core.models.share.score_client import ScoreRequest
from djx.core.run.breakdown import PHASE, forward_timed

JOIN_PAIRS = {"cpu": 64, "cuda": 512}  # pairs scored together at most (each op halves on OOM)


class ScoringDesk:
    """The owner's side of scoring requests: its Scorer (started by the first request) and each
    connection's shared buffer (handoff.py)."""

    def __init__(self, device: str, timeline: dict | None = None):
        self.device = device
        self.timeline = timeline if timeline is not None else {}  # the owner's start-up (Scorer.timeline)
        self._scorer: Scorer | None = None
        self._lock = threading.Lock()

    def preload(self, specs: tuple) -> None:
        """Start the scorer now and have it load `specs` before its first request."""
        with self._lock:
            if self._scorer is None:
                self._scorer = Scorer(self.device, specs, self.timeline)

    @staticmethod
    def inbox():
        from djx.core.models.share.handoff import Inbox
        return Inbox()

    def answer(self, message, conn, inbox) -> bool:
        """Handle `message` when it is about scoring (a buffer handed over, a request: answered on
        `conn`); False when it is not (a request for weights)."""
        from djx.core.models.share.handoff import SharedBuffer
        if isinstance(message, SharedBuffer):  # its file descriptor follows
            from multiprocessing.reduction import recv_handle
            inbox.attach(recv_handle(conn), message.size)
            return True
        if not isinstance(message, ScoreRequest):
            return False
        with self._lock:
            if self._scorer is None:
                self._scorer = Scorer(self.device, timeline=self.timeline)
        message.prepared = inbox.unpack(message.prepared)
        answer = self._scorer.submit(message)
        message.prepared = None  # no view of the buffer outlives the answer
        conn.send_bytes(pickle.dumps(answer, protocol=pickle.HIGHEST_PROTOCOL))
        return True


class AssembledParts(list):
    """The prepared parts of one group, with what the op assembled of them beforehand
    (`assembled`: its `assemble_parts`, then readied on the device by its `ready_parts` where it
    has one; None where it has none; the `seconds` it all took and `phases`, the counters of the
    phases the op timed meanwhile); score_parts takes them as parts."""
    assembled = None
    seconds = 0.0

    def __init__(self, parts=()):
        super().__init__(parts)
        self.phases: dict = {}


@dataclass
class _Pending:
    request: ScoreRequest
    done: threading.Event = field(default_factory=threading.Event)
    answer: tuple = ()


class Scorer:
    """The owner's scoring: one op's waiting requests joined into one set of forwards, in two
    threads so that the device never waits on the host: the gathering thread takes the requests
    waiting for one op, up to the forward budget, and assembles them (`op.assemble_parts`: the
    joined prepared pairs; then `op.ready_parts(loaded, joined, counters)` where the op has it:
    device work before the forwards, such as decoding JPEGs, on a CUDA stream of this thread's own)
    while the scoring thread runs the forwards of the group before; each
    request's own thread (the connection's) sends its answer, not the scoring thread."""

    def __init__(self, device: str, preload: tuple = (), timeline: dict | None = None):
        self.device = device
        self._preload = tuple(preload)  # specs the scoring thread loads first (a failure: left to the first request)
        # its process's start-up, wall-clock instants a warm-up's answer carries to the workers (the
        # summary's startup_parts): scorer_entered_at, scorer_imported_at, scorer_device_at (the
        # owner's), scorer_loaded_at (here)
        self.timeline = timeline if timeline is not None else {}
        self._queue: queue.Queue = queue.Queue()
        self._assembled: queue.Queue = queue.Queue(maxsize=1)  # the next group, ready to score
        self._ops: dict = {}     # key -> the op, unpickled once
        self._models: dict = {}  # spec -> the loaded model, loaded here once
        self._loading = threading.Lock()
        self._stream = None  # the gathering thread's CUDA stream (_aside)
        self._last_end = None  # perf_counter at the end of the scoring thread's last answer
        threading.Thread(target=self._gather, name="djx-scorer-gather", daemon=True).start()
        threading.Thread(target=self._run, name="djx-scorer", daemon=True).start()

    def submit(self, request: ScoreRequest) -> tuple:
        """("scores", list, counters) or ("error", message, user_error), once the thread has scored it."""
        pending = _Pending(request)
        self._queue.put(pending)
        pending.done.wait()
        return pending.answer

    def _gather(self) -> None:
        budget = JOIN_PAIRS["cpu" if self.device == "cpu" else "cuda"]
        held: list = []  # requests taken while joining that belong to another op
        while True:
            first = held.pop(0) if held else self._queue.get()
            if first.request.prepared is None:  # a worker's warm-up: load the op's model now
                self._assembled.put(([first], None, None))
                continue
            group, pairs = [first], len(first.request.prepared.pairs)
            while pairs < budget:
                try:
                    more = self._queue.get_nowait()
                except queue.Empty:
                    break
                if more.request.key == first.request.key and more.request.prepared is not None:
                    group.append(more)
                    pairs += len(more.request.prepared.pairs)
                else:
                    held.append(more)
            t0 = time.perf_counter()
            try:
                op = self._op(first.request)
                parts = AssembledParts(p.request.prepared for p in group)
                if hasattr(op, "assemble_parts"):
                    parts.assembled = op.assemble_parts(parts)
                if parts.assembled is not None and hasattr(op, "ready_parts"):
                    with self._aside():  # e.g. JPEGs decoded on the device while the forwards before run
                        op.ready_parts(self._model(op.spec), parts.assembled, parts.phases)
            except Exception as e:  # noqa: BLE001  (each waiting worker gets the error to raise)
                self._fail(group, e)
                continue
            parts.seconds = time.perf_counter() - t0
            self._assembled.put((group, op, parts))  # waits while the scoring thread is busy

    def _run(self) -> None:
        for spec in self._preload:
            try:
                self._model(spec)
            except Exception:  # noqa: BLE001  (the first request loads it again and reports the error)
                pass
        if self._preload:
            self.timeline.setdefault("scorer_loaded_at", time.time())
        while True:
            group, op, parts = self._assembled.get()
            if op is None:
                self._warm(group)
                continue
            # forwards, OOM retries and phases, reported once: with the first request; joined: the
            # batches scored in forwards shared with another batch
            counters: dict = {"joined_batches": len(group)} if len(group) > 1 else {}
            counters.update(scorer_groups=1, scorer_pairs=sum(len(p.request.prepared.pairs) for p in group))
            counters[PHASE + "assemble"] = parts.seconds
            for key, seconds in parts.phases.items():
                counters[key] = counters.get(key, 0.0) + seconds
            fault = group[0].request.fault
            self._answer(group, lambda op, loaded: op.score_parts(loaded, parts, fault, counters), counters)

    def _warm(self, group: list) -> None:
        """A worker's warm-up: its op's model loaded here; the answer carries no scores, and the
        start-up's instants (`timeline`) for the worker's report."""
        try:
            op = self._op(group[0].request)
            from djx.core.models.pool import load_said
            loaded = load_said(self._model, op.spec, op.name)  # a loader's failure: the line a worker's load gives
            if hasattr(op, "warm_device"):  # what its device work needs, before the first batch
                op.warm_device(loaded)
        except Exception as e:  # noqa: BLE001  (the worker gets the error to raise)
            self._fail(group, e)
            return
        self.timeline.setdefault("scorer_loaded_at", time.time())
        for pending in group:
            pending.answer = ("scores", [], dict(self.timeline))
            pending.done.set()

    def _answer(self, group: list, score, counters: dict | None = None) -> None:
        """Answer each request of `group` with its part of `score(op, loaded)`, or the error; the
        forward's and this thread's busy time go in `counters` (with the first answer)."""
        t0 = time.perf_counter()
        try:
            op = self._op(group[0].request)
            loaded = self._model(op.spec)
            import torch
            with torch.inference_mode():
                scores = forward_timed(lambda: score(op, loaded), counters)
            if counters is not None:
                end = time.perf_counter()
                counters[PHASE + "scorer_busy"] = end - t0
                # the time since its last answer ended (since this one began, for its first): summed,
                # this thread's span from its first call to its last, the busy share's denominator
                counters[PHASE + "scorer_span"] = end - (t0 if self._last_end is None else self._last_end)
                self._last_end = end
            answers = [("scores", s, (counters or {}) if i == 0 else {}) for i, s in enumerate(scores)]
        except Exception as e:  # noqa: BLE001  (each waiting worker gets the error to raise)
            self._fail(group, e)
            return
        for pending, answer in zip(group, answers):
            pending.answer = answer
            pending.done.set()

    @staticmethod
    def _fail(group: list, e: Exception) -> None:
        from djx.core.errors import DjxError
        for pending in group:
            user_error = isinstance(e, DjxError)  # said as it is; anything else with its type
            pending.answer = ("error", str(e) if user_error else f"{type(e).__name__}: {e}", user_error)
            pending.done.set()

    def _op(self, request: ScoreRequest):
        if request.key not in self._ops:
            if request.op_bytes is None:  # its connection sent them to a scorer that has since restarted
                raise RuntimeError(f"the scorer does not know op {request.key[:12]}")
            import dill
            self._ops[request.key] = dill.loads(request.op_bytes)
        return self._ops[request.key]

    def _model(self, spec):
        with self._loading:  # both threads may ask (the gathering thread for `ready_parts`): loaded once
            if spec not in self._models:
                from djx.core.models.pool import loader_for
                self._models[spec] = loader_for(spec)(spec, self.device)
            return self._models[spec]

    @contextmanager
    def _aside(self):
        """On a CUDA device, the gathering thread's device work on a stream of its own (made once),
        so that it runs beside the scoring thread's forwards instead of queuing behind them."""
        if not self.device.startswith("cuda"):
            yield
            return
        import torch
        if self._stream is None:
            self._stream = torch.cuda.Stream(device=self.device)
        with torch.cuda.stream(self._stream):
            yield
