"""A Ray run's end waits for Ray Data's fetch threads to see the end of the iteration (one still in
Ray at shutdown ends the process), but not for Ray Data's threads that live as long as the process:
its usage poller (asks Prometheus every 10 s, forever) once cost every run that joined a cluster
10 s at its end."""
from __future__ import annotations

import threading

from djx.core.executors.ray.cluster import let_fetches_end


def test_the_end_waits_for_fetch_threads_and_not_for_ray_datas_lifelong_ones():
    before = set(threading.enumerate())
    go, fetched = threading.Event(), threading.Event()
    forever = threading.Event()  # never set: the poller parks as Ray Data's does

    def fetch():
        go.wait(30)
        fetched.set()

    pollers = [threading.Thread(target=forever.wait, args=(30,), name=name, daemon=True)
               for name in ("data-usage-metrics-poller", "Prefetcher")]
    fetcher = threading.Thread(target=fetch, name="fetch", daemon=True)
    for t in (*pollers, fetcher):
        t.start()
    go.set()
    try:
        let_fetches_end(before, seconds=60)
        assert fetched.is_set() and not fetcher.is_alive()  # the fetch thread was waited for
        assert all(t.is_alive() for t in pollers)  # returned while the lifelong threads still run
    finally:
        forever.set()
