"""The output check in several processes: at the end of a run every core is idle but the one that
checks, and on a many-core box the check of a text-only run took as long as the run.

The JSON Lines outputs are cut at line starts into about one piece per process, each piece is
checked in a forked child with the same setup, and the caller merges what the children found (the
counts, the problems, the positions each piece marked). Where this system cannot fork, or a child
fails (a damaged line, a child killed), the caller checks it all in its own process, whose messages
name the file and line."""
from __future__ import annotations

import os
import signal

PIECE_BYTES = 8 << 20  # a piece smaller than this is not worth a process


def pieces(files: list[tuple[str, str]], workers: int, least: int = PIECE_BYTES) -> list[tuple[str, str, int, int]]:
    """(kind, path, start, end) byte ranges of the (kind, path) files, each starting at a line, about
    the files' total bytes / `workers` each and at least `least`; empty files give none."""
    sizes = [(kind, path, os.path.getsize(path)) for kind, path in files]
    step = max(least, 1, -(-sum(size for *_, size in sizes) // max(workers, 1)))
    out = []
    for kind, path, size in sizes:
        cuts = [0]
        with open(path, "rb") as f:
            while cuts[-1] + step < size:
                f.seek(cuts[-1] + step - 1)  # a line that starts at the cut is the next piece's
                f.readline()
                if f.tell() >= size:
                    break
                cuts.append(f.tell())
        cuts.append(size)
        out += [(kind, path, a, b) for a, b in zip(cuts, cuts[1:]) if a < b]
    return out


def shares(sizes: list[int], workers: int) -> list[list[int]]:
    """The indexes of `sizes` dealt to at most `workers` processes, largest first to the least
    loaded, so the processes end together."""
    loads: list[list[int]] = [[] for _ in range(max(1, min(workers, len(sizes))))]
    weight = [0] * len(loads)
    for i in sorted(range(len(sizes)), key=lambda i: -sizes[i]):
        k = weight.index(min(weight))
        loads[k].append(i)
        weight[k] += sizes[i]
    return [load for load in loads if load]


def forked(work, items: list, sizes: list[int], workers: int) -> list | None:
    """work(item) for every item, in up to `workers` forked processes (the work and its setup are
    inherited, not pickled); the results in the items' order, or None where this system cannot
    fork or a process failed."""
    import multiprocess as mp
    if "fork" not in mp.get_all_start_methods():
        return None
    ctx, started = mp.get_context("fork"), []
    try:
        for load in shares(sizes, workers):
            mine, theirs = ctx.Pipe(duplex=False)
            proc = ctx.Process(target=_child, args=(work, [(i, items[i]) for i in load], theirs), daemon=True)
            try:
                proc.start()
            except (AssertionError, OSError):  # a daemonic process (no children allowed), no memory to fork
                mine.close()
                return None
            finally:
                theirs.close()
            started.append((proc, mine))
        results: dict = {}
        for _, conn in started:
            try:
                status, got = conn.recv()
            except EOFError:  # the child died without an answer
                return None
            if status != "ok":
                return None
            results.update(got)
        return [results[i] for i in range(len(items))]
    finally:
        for proc, conn in started:
            if proc.is_alive():
                proc.terminate()
            proc.join()
            conn.close()


def _child(work, load: list, conn) -> None:
    # the parent's handlers (a graceful stop that writes state) are not this child's: a signal ends it
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)
    try:
        answer = ("ok", {i: work(item) for i, item in load})
    except BaseException as e:  # noqa: BLE001  the parent checks it all itself and says what is wrong
        answer = ("failed", f"{type(e).__name__}: {e}")
    conn.send(answer)
    conn.close()
