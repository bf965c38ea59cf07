"""FirstPositions: key -> the smallest position offered with it, the table under every exact and
banded duplicate index. It holds up to `budget` keys in memory; past that it moves them to an SQLite
file in the run's state folder and goes on, so memory stays bounded whatever the dataset's size."""
from __future__ import annotations

import glob
import json
import os
import sqlite3
import tempfile
from dataclasses import dataclass

DEFAULT_BUDGET = 2_000_000  # keys in memory per index, its tables together (about 111 MB a million)
_PREFIX = "dedup-table-"


@dataclass(frozen=True)
class IndexSpace:
    """Where a deduplicator's index keeps its tables: memory up to `budget` keys (an index with
    several tables, such as MinHash's bands, shares it among them), then files in `folder` (None:
    memory only, as in Pipeline.process)."""
    folder: str | None = None
    budget: int = DEFAULT_BUDGET

    def table(self) -> "FirstPositions":
        return FirstPositions(self.folder, self.budget)

    def clear(self) -> None:
        """Remove the table files an interrupted dedup phase left behind."""
        for path in glob.glob(os.path.join(self.folder, _PREFIX + "*")) if self.folder else ():
            os.remove(path)


class FirstPositions:
    def __init__(self, folder: str | None = None, budget: int = DEFAULT_BUDGET):
        self.folder, self.budget = folder, max(1, budget)
        self.memory: dict = {}
        self.db: sqlite3.Connection | None = None
        self.path: str | None = None

    def offer(self, key, pos: int) -> int | None:
        """Record `pos` for `key`; the smallest position the key had before (None: a new key)."""
        before = self.memory.get(key)
        if before is None and self.db is not None:
            before = self._stored(key)
        self.memory[key] = pos if before is None else min(before, pos)
        if len(self.memory) > self.budget and self.folder is not None:
            self._spill()
        return before

    def get(self, key, default: int) -> int:
        found = [v for v in (self.memory.get(key), self._stored(key) if self.db is not None else None)
                 if v is not None]
        return min(found) if found else default

    def close(self) -> None:
        if self.db is not None:
            self.db.close()
            self.db = None
            os.remove(self.path)

    def _spill(self) -> None:
        if self.db is None:
            fd, self.path = tempfile.mkstemp(prefix=_PREFIX, suffix=".sqlite", dir=self.folder)
            os.close(fd)
            self.db = sqlite3.connect(self.path, isolation_level=None)
            self.db.executescript("PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF;"
                                  "CREATE TABLE first (key TEXT PRIMARY KEY, pos INTEGER) WITHOUT ROWID;")
        with self.db:
            self.db.executemany("INSERT INTO first VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET "
                                "pos = min(pos, excluded.pos)", ((_text(k), p) for k, p in self.memory.items()))
        self.memory.clear()

    def _stored(self, key) -> int | None:
        row = self.db.execute("SELECT pos FROM first WHERE key = ?", (_text(key),)).fetchone()
        return row[0] if row else None


def _text(key) -> str:
    return key if isinstance(key, str) else json.dumps(key)
