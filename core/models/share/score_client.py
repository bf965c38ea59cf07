"""A worker's side of scoring in one place per device (scoring.py is the owner's side)."""
from __future__ import annotations

import contextlib
import hashlib
import pickle
import time
from dataclasses import dataclass

CONNECT_SECONDS = 120.0  # how long a worker waits for its scorer (restarting) before giving up


def takes_part(op) -> bool:
    """Whether `op` can score in its device's scorer (it prepares in the worker: scoring.py)."""
    return hasattr(op, "score_parts")


@dataclass
class ScoreRequest:
    """One batch's prepared pairs for the op in `op_bytes` (dill; `key` names it in the owner; None
    once the connection's scorer has it); `prepared` None: load the op's model (a warm-up)."""
    key: str
    op_bytes: bytes | None
    prepared: object
    fault: tuple = ()


class ScoreClient:
    """A worker's line to its device's scorer (the weight owner at `address`). The prepared
    tensors go through the connection's shared buffer (handoff.py); an op's bytes go once per
    connection (a restarted scorer gets them again on the new connection)."""

    def __init__(self, address, device: str, connect_seconds: float = CONNECT_SECONDS, waiting=None):
        self.address, self.device, self.connect_seconds = address, device, connect_seconds
        self.waiting = waiting or contextlib.nullcontext  # wraps each wait for the scorer (a worker's lanes)
        self._conn = None
        self._outbox = None
        self._sent: set = set()  # op keys this connection's scorer has the bytes of
        self._ops: dict = {}  # id(op) -> (key, bytes)

    def warm(self, op) -> dict:
        """Have the scorer load `op`'s model now (a worker's start-up), not at the first batch; the
        scorer's start-up instants (scorer_entered_at, scorer_imported_at, scorer_loaded_at: wall
        clock) where it says them."""
        said: dict = {}
        self.score(op, None, counters=said)
        return {k: v for k, v in said.items() if k.startswith("scorer_") and k.endswith("_at")}

    def score(self, op, prepared, fault=(), counters: dict | None = None) -> list:
        """The scores of `prepared` under `op`, from the scorer (its forwards and OOM retries added
        to `counters`); waits out an owner's restart."""
        from djx.core.errors import DjxError
        answer = self._exchange(op, prepared, fault)
        if answer[0] == "scores":
            if counters is not None:
                for name, n in answer[2].items():
                    counters[name] = counters.get(name, 0) + n
            return answer[1]
        _, message, user_error = answer
        raise DjxError(message) if user_error else RuntimeError(f"the scorer of {self.device}: {message}")

    def request(self, op, prepared, fault=()) -> ScoreRequest:
        """The request for `prepared` under `op` (the op pickled once per client)."""
        if id(op) not in self._ops:
            import dill
            data = dill.dumps(op)
            self._ops[id(op)] = (hashlib.sha256(data).hexdigest(), data)
        key, data = self._ops[id(op)]
        return ScoreRequest(key, data, prepared, tuple(fault))

    def _exchange(self, op, prepared, fault) -> tuple:
        """The scorer's answer (Scorer.submit's tuple), over the owner's socket; waits out its restart."""
        from djx.core.errors import DjxError
        deadline, last = time.monotonic() + self.connect_seconds, None
        while time.monotonic() < deadline:
            try:
                return self._ask(op, prepared, fault)
            except (OSError, EOFError) as e:  # not listening yet, or it died: the executor restarts it
                last = e
                self._disconnect()
                with self.waiting():
                    time.sleep(0.1)
        raise DjxError(f"the scorer of {self.device} did not answer for {self.connect_seconds:g} s "
                       f"(last: {type(last).__name__}: {last})")

    def _ask(self, op, prepared, fault) -> tuple:
        from multiprocessing.connection import Client
        from multiprocessing.reduction import send_handle

        from djx.core.models.share.handoff import Outbox
        if self._conn is None:
            self._conn = Client(self.address.path, "AF_UNIX", authkey=self.address.authkey)
            self._outbox, self._sent = Outbox(), set()
        conn = self._conn

        def send_buffer(message, fd) -> None:
            conn.send_bytes(pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL))
            send_handle(conn, fd, None)

        shared = self._outbox.pack(prepared, send_buffer) if prepared is not None else None
        request = self.request(op, shared, fault)
        if request.key in self._sent:
            request.op_bytes = None  # this connection's scorer has them
        conn.send_bytes(pickle.dumps(request, protocol=pickle.HIGHEST_PROTOCOL))
        with self.waiting():  # the worker's other lane prepares the next batch meanwhile
            data = conn.recv_bytes()
        answer = pickle.loads(data)
        self._sent.add(request.key)
        return answer

    def _disconnect(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except OSError:
                pass
        if self._outbox is not None:
            self._outbox.close()
        self._conn, self._outbox = None, None
