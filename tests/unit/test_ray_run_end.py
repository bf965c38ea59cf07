"""A Ray run's end waits for Ray Data's fetch threads to see the end of the iteration (one still in
Ray at shutdown ends the process), but not for Ray Data's threads that live as long as the process:
its usage poller (asks Prometheus every 10 s, forever) once cost every run that joined a cluster
10 s at its end."""
from __future__ import annotations

import os
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


def test_a_dedup_phase_on_ray_waits_at_its_end_for_the_threads_it_started_not_for_rays_own(monkeypatch):
    """The threads Ray starts as it connects (its log printer, error listener, GC thread) end only
    with the shutdown that follows the wait: counting them cost every dedup phase on Ray 10 s."""
    import djx.core.executors.ray.cluster as cluster
    from djx.core.executors.ray.dedup_rows import RayGroups
    release = threading.Event()
    ray_own = threading.Thread(target=release.wait, args=(30,), name="ray_print_logs", daemon=True)

    class Joined:
        def shut_down(self, ray):
            release.set()

    def connect(ray, address, stop=None):
        ray_own.start()
        return Joined()
    waited_for = []

    def let_fetches_end(before, seconds=10.0):
        waited_for.extend(t for t in threading.enumerate() if t not in before and t.name not in cluster.LIFELONG_THREADS)
    monkeypatch.setattr(cluster, "connect", connect)
    monkeypatch.setattr(cluster, "let_fetches_end", let_fetches_end)
    groups = RayGroups("127.0.0.1:6379")
    fetcher = threading.Thread(target=release.wait, args=(30,), name="fetch", daemon=True)  # one of Ray Data's
    try:
        with groups.session():
            groups.ray()
            fetcher.start()
    finally:
        release.set()
    assert fetcher in waited_for and ray_own not in waited_for


def test_the_working_folder_goes_at_the_end_and_a_lost_node_gets_no_call_into_ray(tmp_path):
    """The empty folder Ray was started from goes with the run's end, also when the driver's node
    died: then Ray would end this process at its next call, so the end calls nothing in Ray (the
    folder was left behind on that path)."""
    from djx.core.executors.ray.cluster import Ours
    calls = []

    class Ray:
        def __getattr__(self, name):
            calls.append(name)
            return lambda *a, **k: None
    for lost in (False, True):
        folder = tmp_path / f"djx-ray-cwd-{lost}"
        folder.mkdir()
        calls.clear()
        Ours([], str(folder)).shut_down(Ray(), lost=lost)
        assert not folder.exists()
        assert calls == ([] if lost else ["shutdown"])


def test_a_killed_drivers_working_folder_is_swept_by_a_later_run_and_nothing_else(tmp_path):
    """A driver killed before its end (SIGKILL) leaves its empty working folder; the next run
    removes those whose driver is gone, and only those: a live driver's, a non-empty one, a link
    (nor its target), a file, another program's folder stay."""
    from djx.core.executors.ray.work_dir import PREFIX, empty_working_dir, sweep_left
    with open("/proc/sys/kernel/pid_max") as f:
        gone = int(f.read()) + 1  # above the highest process id this kernel gives: no process has it
    dead, live, full = (tmp_path / f"{PREFIX}{pid}-abc_12" for pid in (gone, os.getpid(), gone + 1))
    for folder in (dead, live, full):
        folder.mkdir()
    (full / "left.txt").write_text("kept")
    target = tmp_path / "target"
    target.mkdir()
    (tmp_path / f"{PREFIX}{gone}-link").symlink_to(target)
    (tmp_path / f"{PREFIX}{gone}-file").write_text("")
    (tmp_path / "djx-ray-cwd-older").mkdir()  # an older djx's name, with no process id: left
    (tmp_path / f"other-{gone}-abc").mkdir()
    before = sorted(p.name for p in tmp_path.iterdir())
    assert sweep_left(str(tmp_path)) == [str(dead)]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(n for n in before if n != dead.name)
    assert target.is_dir() and (full / "left.txt").read_text() == "kept"
    assert sweep_left(str(tmp_path / "missing")) == []
    # the folder a run starts Ray from carries its driver's id, so it is swept once that driver is gone
    here = os.getcwd()
    with empty_working_dir() as folder:
        assert os.path.basename(folder).startswith(f"{PREFIX}{os.getpid()}-") and os.getcwd() == folder
    assert os.getcwd() == here
    os.rmdir(folder)
