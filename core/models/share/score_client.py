"""A worker's side of scoring in one place per device (scoring.py is the owner's side)."""
from __future__ import annotations

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
    """One batch's prepared pairs for the op in `op_bytes` (dill; `key` names it in the owner)."""
    key: str
    op_bytes: bytes
    prepared: object
    fault: tuple = ()


class ScoreClient:
    """A worker's line to its device's scorer (the weight owner at `address`)."""

    def __init__(self, address, device: str, connect_seconds: float = CONNECT_SECONDS):
        self.address, self.device, self.connect_seconds = address, device, connect_seconds
        self._conn = None
        self._ops: dict = {}  # id(op) -> (key, bytes)

    def warm(self, op) -> None:
        """Have the scorer load `op`'s model now (a worker's start-up), not at the first batch."""
        self.score(op, None)

    def score(self, op, prepared, fault=(), counters: dict | None = None) -> list:
        """The scores of `prepared` under `op`, from the scorer (its forwards and OOM retries added
        to `counters`); waits out an owner's restart."""
        from multiprocessing.connection import Client

        from djx.core.errors import DjxError
        if id(op) not in self._ops:
            import dill
            data = dill.dumps(op)
            self._ops[id(op)] = (hashlib.sha256(data).hexdigest(), data)
        key, data = self._ops[id(op)]
        message = pickle.dumps(ScoreRequest(key, data, prepared, tuple(fault)), protocol=pickle.HIGHEST_PROTOCOL)
        deadline, last = time.monotonic() + self.connect_seconds, None
        while time.monotonic() < deadline:
            try:
                if self._conn is None:
                    self._conn = Client(self.address.path, "AF_UNIX", authkey=self.address.authkey)
                self._conn.send_bytes(message)
                answer = pickle.loads(self._conn.recv_bytes())
                break
            except (OSError, EOFError) as e:  # not listening yet, or it died: the executor restarts it
                last, self._conn = e, None
                time.sleep(0.1)
        else:
            raise DjxError(f"the scorer of {self.device} did not answer for {self.connect_seconds:g} s "
                           f"(last: {type(last).__name__}: {last})")
        if answer[0] == "scores":
            if counters is not None:
                for name, n in answer[2].items():
                    counters[name] = counters.get(name, 0) + n
            return answer[1]
        _, message, user_error = answer
        raise DjxError(message) if user_error else RuntimeError(f"the scorer of {self.device}: {message}")
