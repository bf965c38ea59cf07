"""A worker's lanes take turns on its one core: a lane back from the device's scorer gets the core
before a lane that would start a new batch (its batch is the one the run waits for)."""
import threading

from djx.core.executors.local.lanes import _Core


def _wait_until(cond) -> None:
    done = threading.Event()
    while not cond():
        done.wait(0.001)  # Event.wait, not time.sleep: a state poll


def test_a_lane_back_from_the_device_gets_the_core_before_a_new_batch():
    core = _Core()
    core.acquire()                      # lane A prepares a batch
    order = []

    def lane(name: str, back: bool) -> None:
        core.acquire(back=back)
        order.append(name)
        core.release()

    new = threading.Thread(target=lane, args=("new batch", False))
    new.start()
    _wait_until(lambda: core.waiting == 1)   # it asked first
    returning = threading.Thread(target=lane, args=("back from the device", True))
    returning.start()
    _wait_until(lambda: core.waiting == 2)
    core.release()                      # lane A waits for the device: the core is free
    new.join()
    returning.join()
    assert order == ["back from the device", "new batch"]


def test_one_lane_at_a_time_holds_the_core():
    core = _Core()
    inside, most = [0], [0]
    guard = threading.Lock()

    def lane(back: bool) -> None:
        for _ in range(200):
            core.acquire(back=back)
            with guard:
                inside[0] += 1
                most[0] = max(most[0], inside[0])
            with guard:
                inside[0] -= 1
            core.release()

    threads = [threading.Thread(target=lane, args=(k % 2 == 0,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert most[0] == 1 and core.waiting == 0


class _WatchedStatus:
    """A worker's shared status as the executor's watchdog sees it at every single write: the
    (task id, since) it would read there."""

    def __init__(self):
        object.__setattr__(self, "fields", {"task_id": -1, "op_index": -1, "since": 0.0})
        object.__setattr__(self, "seen", [])

    def __getattr__(self, name):
        return self.fields[name]

    def __setattr__(self, name, value):
        self.fields[name] = value
        self.seen.append((self.fields["task_id"], self.fields["since"]))


def test_the_watchdog_never_sees_a_task_with_a_time_it_did_not_start_at():
    # the executor kills a worker whose shown task has made no progress for sample_timeout since
    # `since`; a task shown beside the status's first `since` (0.0) looked stuck for the machine's
    # uptime, and a worker was killed mid-run on a machine up longer than that
    from djx.core.executors.local.lanes import Lanes
    status = _WatchedStatus()
    lanes = Lanes(2, status)
    with lanes.working(7):
        lanes.on_op(0)
        started = status.since
        with lanes.waiting():  # another lane computes meanwhile
            with lanes.working(8):
                lanes.on_op(0)
    assert started > 0.0
    assert [t for t, _ in status.seen if t != -1]  # the tasks were shown
    assert all(since > 0.0 for task, since in status.seen if task != -1)
