"""A worker's end-of-run memory, read from outside it (plan/resources.py: read_again)."""
from djx.core.plan.resources import read_again
from djx.core.records import WorkerReport

MiB = 1 << 20


def pid_never_used() -> int:
    with open("/proc/sys/kernel/pid_max") as f:
        return int(f.read()) + 1  # above the kernel's largest pid: no process has it


def test_the_figures_read_again_are_the_process_s_own_pages_now():
    import os
    stale = WorkerReport(uss=1, pss=1, peak_uss=1, peak_pss=1)
    before = read_again(stale, os.getpid())
    held = b"\x01" * (64 * MiB)  # every page written: private to this process
    after = read_again(stale, os.getpid())
    assert after.uss - before.uss > 60 * MiB and after.pss - before.pss > 60 * MiB
    assert (after.peak_uss, after.peak_pss) == (after.uss, after.pss)  # the new figures are the highest
    del held


def test_a_peak_reported_earlier_is_kept_and_a_gone_process_changes_nothing():
    import os
    report = WorkerReport(uss=5, pss=5, peak_uss=1 << 50, peak_pss=1 << 50)
    again = read_again(report, os.getpid())
    assert again.peak_uss == 1 << 50 and again.peak_pss == 1 << 50 and again.uss > 5
    assert read_again(report, pid_never_used()) == report
