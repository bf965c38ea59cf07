"""A dead worker's job: retried once on a fresh worker, then bisected until the poison sample is
alone, which is rejected with the reason; a job that timed out goes one sample at a time at once
(bisecting would wait out the timeout at every level). Nothing is dropped: every item of the job
ends up in a result or in a rejection."""
from __future__ import annotations

from djx.core.executors.local.inflight import InFlight, Job
from djx.core.executors.local.worker import Task
from djx.core.io.image_paths import path_writer
from djx.core.records import BatchResult, parse_pending


def after_death(job: Job, op_index: int, how: str, inflight: InFlight, timed_out: bool, chain, new_id) -> None:
    """Requeue (retry, bisect, or split into single samples) the job whose worker died running op
    `op_index`, or reject it when it is a lone sample that already killed or hung; `new_id()`
    numbers the new tasks."""
    items = job.task.items
    if len(items) == 1 and (job.deaths >= 2 or job.bisected or timed_out):
        reject_lone(job, op_index, how, inflight, "timeout" if timed_out else "worker_died", chain)
    elif timed_out:
        for item in reversed(items):
            _queue(Job(Task(new_id(), [item]), job.batch_no, 1, True), inflight)
    elif not (job.deaths >= 2 or job.bisected):
        _queue(Job(Task(new_id(), items), job.batch_no, job.deaths), inflight)
    else:
        mid = len(items) // 2
        for half in (items[mid:], items[:mid]):
            _queue(Job(Task(new_id(), half), job.batch_no, 1, True), inflight)


def reject_lone(job: Job, op_index: int, how: str, inflight: InFlight, code: str, chain) -> None:
    """Reject the job's one sample with the op that was running and how the worker died."""
    item = job.task.items[0]
    if item.pending:  # the worker parsed it; here we only had the line
        parse_pending([item])
    known = 0 <= op_index < len(chain.ops)
    op = chain.ops[op_index].name if known else "startup"
    res = BatchResult.empty(len(chain.ops))
    # the record every rejection gets (raises FailFast under on_error: fail)
    rej = chain.reject(item, op_index if known else None, f"worker died while running {op} ({how})", code)
    rej.op = op  # "startup": it died before its first op
    if known:  # it passed the ops before the one that killed its worker, and is that op's rejection
        images = isinstance(item.record, dict) and bool(item.record.get(chain.ctx.image_key))
        for k in range(op_index + 1):
            counts = res.op_counts[k]
            counts.seen += 1
            counts.with_images += images and chain.ops[k].uses_images
            counts.kept += k < op_index
        res.op_counts[op_index].rejected += 1
    writer = path_writer(chain.ctx, chain.ops)
    if writer is not None:  # image paths as every other record of the outputs has them
        rej.record = writer.copy(rej.record)
    res.rejected.append(rej)
    inflight.add_part(job.batch_no, item.pos, res, 1)


def _queue(job: Job, inflight: InFlight) -> None:
    inflight.jobs[job.task.id] = job
    inflight.ready.appendleft(job)
