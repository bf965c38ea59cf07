"""RunLedger: consumes the executor's results in input order. It writes them, keeps the run's
counts, takes checkpoints every `checkpoint_every` batches (and on the way out of a failed run),
runs the early checks, and at the end checks the outputs and writes the summary."""
from __future__ import annotations

import shutil
import time

from djx.core.run.breakdown import breakdown, startup_parts
from djx.core.dedup.phase import deduplicate
from djx.core.run.check import check_outputs
from djx.core.run.chain import OpChain
from djx.core.run.early_check import EarlyCheck
from djx.core.run.estimate import RunClock
from djx.core.errors import CheckError, DjxError
from djx.core.io.durable import write_failed
from djx.core.io.outputs import OutputWriter
from djx.core.plan.resources import cpu_count
from djx.core.run.progress import Progress
from djx.core.io.readers import ReadState
from djx.core.recipe.recipe import Recipe
from djx.core.records import BatchResult
from djx.core.run.resume import ResumePoint, RunCounts
from djx.core.run.stop import ctrl_c_after
from djx.core.run.summary import build_summary, format_summary, systematic_rejection


class RunLedger:
    """Use as a context manager around the result loop: leaving it by an exception between
    batches saves every batch finished by then, so the next run resumes from there."""

    def __init__(self, writer: OutputWriter, start: ResumePoint, chain: OpChain, recipe: Recipe, executor,
                 progress: bool = True, log=print, t0: float | None = None, clock: RunClock | None = None):
        self.writer, self.start, self.chain, self.recipe, self.log = writer, start, chain, recipe, log
        self.executor = executor
        self.counts = start.counts
        self.t0 = time.monotonic() if t0 is None else t0  # when this session started
        self.before = (start.counts.seconds, start.counts.restarts)  # earlier sessions' totals
        self.session_samples = 0
        self.progress = progress
        self.clock = clock  # the run's expected size and start-up end; a trial's limit
        self.bar: Progress | None = None
        self.read_at: dict | None = None   # reader position after the last batch written
        self.batches = self.saved = 0      # batches written; ... as of the last checkpoint
        self.write_seconds = 0.0           # this session's time in add(): writing and the books
        # the last batch written whole: (batches, reader position, counts, parts' position), set in one
        # assignment, so an interrupt anywhere in `add` saves exactly the batches finished before it
        self.done: tuple | None = None
        # a run's first samples show a systematic failure (a resumed run has passed that point)
        self.dedup_mark = (start.manifest or {}).get("dedup")  # how far the dedup phase got: None, move, done
        self.early = None if start.resumed or not recipe.stop_on_systematic_failure else EarlyCheck(
            [op.name for op in chain.ops], recipe.image_special_token,
            [op.image_key or chain.ctx.image_key for op in chain.ops])

    def __enter__(self) -> "RunLedger":
        self.writer.open(self.start.manifest)  # completes a move of duplicates a stop cut short
        if self.dedup_mark is not None:
            self.dedup_mark = {**self.dedup_mark, "stage": "done"}
        w = self.clock
        self.bar = Progress(w.total if w else None, self.start.read.records, self.progress, t0=self.t0)
        # a re-filter whose samples carry their stats loads models only when a sample lacks them
        models = [] if self.chain.lazy_models else [s.label() for s in dict.fromkeys(self.chain.model_specs())]
        self.bar.starting(models,
                          getattr(getattr(self.executor, "plan", None), "workers", None))
        return self

    def add(self, res: BatchResult) -> None:
        t0 = time.perf_counter()
        try:
            self._add(res)
        finally:
            self.write_seconds += time.perf_counter() - t0

    def _add(self, res: BatchResult) -> None:
        if self.early is not None:
            self._stop_if(self.early.add(res))
        with ctrl_c_after():  # a Ctrl-C never cuts a batch: it comes once the batch is recorded
            try:
                self._write(res)
            except OSError as e:
                raise DjxError(self._write_failed(e)) from None
            self.counts.add(res)
            self.session_samples += res.samples
            self.read_at = res.read_at
            self.batches += 1
            self.done = (self.batches, self.read_at, self.counts.to_dict(), self.writer.position())
        if self.clock is not None:
            self.clock.batch_done(res.samples, res.began_at)
        if self.batches % self.recipe.checkpoint_every == 0:
            try:
                self.writer.checkpoint(self._checkpoint(self.read_at))
            except OSError as e:
                raise DjxError(self._write_failed(e)) from None
            self.saved = self.batches
        # the display follows the writes (and a checkpoint due): it never shows a sample not written
        if self.clock is not None:
            self.bar.processing(self.clock.processing_at, self.clock.untimed)
        else:
            self.bar.processing(self.t0)
        self.bar.update(res.samples, len(res.kept))

    def _write(self, res: BatchResult) -> None:
        names = self.chain.ctx.input_files
        self.writer.write("kept", res.kept)
        self.writer.write("dropped", res.dropped)
        self.writer.write("rejected", [r.to_record(names) for r in res.rejected])

    def _write_failed(self, e: OSError) -> str:
        """What a failed write means: the data up to the last checkpoint survived, and how to go on."""
        return write_failed(self.writer.paths.state_dir, e)

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            if exc_type is not None and self.done is not None and self.done[0] > self.saved:
                self._save_progress()
        finally:
            self.bar.close()
            try:
                self.writer.close()
            except OSError:  # a full disk again: the error that stopped the run says it
                if exc_type is None:
                    raise
            finally:
                self.writer.release()  # held to the very end: no second run during the check or finish

    def end(self, state: ReadState, stop=None) -> None:
        """Every batch is in: the final checkpoint, at the reader's end; then the dedup phase (its
        checkpoints and moves: a full disk there is said as in the streaming pass)."""
        try:
            self.writer.checkpoint(self._checkpoint(dict(vars(state))))
            self.saved = self.batches
            self._deduplicate(dict(vars(state)), stop)
        except OSError as e:
            raise DjxError(self._write_failed(e)) from None

    def _deduplicate(self, read_at: dict, stop=None) -> None:
        """Move the duplicates the recipe's deduplicators find to the dropped part, exactly once: the
        manifest names the move before it is made, and a resumed run completes it (writer.open)."""
        if self.dedup_mark is not None:
            return  # an earlier session did it
        writer = self.writer
        before = writer.position()
        cluster = None
        # on a cluster the run joined, the groups are formed there with Ray Data; a local Ray that djx
        # started is this machine's cores, where a shuffle only adds cost (100k MinHash samples:
        # 12.0 s against 1.7 s, and a second Ray start): its phase runs here, as without Ray
        if self.recipe.executor == "ray" and self.recipe.ray_address:
            from djx.core.executors.ray.dedup_rows import RayGroups
            from djx.core.executors.ray.ray_log import log_path
            cluster = RayGroups(self.recipe.ray_address, log_path(self.recipe.export_path))
        result = deduplicate(self.chain.ops, writer.part("kept"), writer.part("dropped"), writer.part("rejected"),
                             writer.part("kept.dedup"),
                             writer.part("dropped.dedup"), self.counts, self.chain.ctx.image_key,
                             self.recipe.dedup_memory_entries, cluster, stop)
        if result is None:
            return
        self.dedup_mark = {"stage": "move", "moved": result.moved}
        # the new parts' lengths and digests go in the signed manifest before they replace the old
        writer.checkpoint(self._checkpoint(read_at), at=writer.position_after_dedup(before))
        writer.move_duplicates()
        self.dedup_mark = {**self.dedup_mark, "stage": "done"}
        writer.checkpoint(self._checkpoint(read_at))
        if result.moved:
            self.log(f"[djx] deduplication: {result.moved} duplicate(s) moved to the dropped output")

    def _checkpoint(self, read_at: dict) -> dict:
        """The manifest of a checkpoint after `read_at`, with the whole run's time and restarts."""
        self._update_totals()
        manifest = self.start.checkpoint(read_at, self.counts)
        return {**manifest, "dedup": self.dedup_mark} if self.dedup_mark else manifest

    def _update_totals(self, counts: RunCounts | None = None) -> float:
        """Whole-run seconds and restarts (earlier sessions' plus this one's) into `counts` (the
        run's); this session's seconds."""
        counts = self.counts if counts is None else counts
        session = time.monotonic() - self.t0
        counts.seconds = self.before[0] + session
        counts.restarts = self.before[1] + self.executor.restarts
        return session

    def finish(self, plan, state: ReadState, read_seconds: float = 0.0) -> dict:
        """Check the written parts, move them into place with the summary; return the summary.
        `read_seconds`: the main process's time reading the input. Raises CheckError (after
        writing) when the stats or the counts do not add up."""
        recipe, writer = self.recipe, self.writer
        self.bar.close()  # its last line before the table
        if self.early is not None:
            self._stop_if(self.early.at_end())
        if state.records == 0:
            self.log(f"[djx] {recipe.dataset_path} holds no samples; writing empty outputs")
        report = check_outputs(writer.part("kept"), writer.part("dropped"), writer.part("rejected"),
                               self.chain.filter_stats_keys(), recipe.image_key, state.records, ops=self.chain.ops,
                               workers=min(getattr(plan, "workers", 1), cpu_count()))  # the cores the run had
        session = self._update_totals()
        summary = build_summary(recipe, writer.paths, plan, self.executor, self.chain.ops, self.counts, state, report,
                                session, self.session_samples, self.start.resumed)
        if self.clock is not None:
            summary.update(self.clock.summary_fields(summary, self.start.resumed))
            summary["timing"]["startup_parts"] = startup_parts(self.executor, self.clock)
        summary["time_breakdown"] = breakdown(summary["ops"], {"read": read_seconds, "write": self.write_seconds},
                                              (summary.get("timing") or {}).get("processing_seconds") or session)
        if writer.key.problem:  # nothing signed: the stats it writes, its resume state
            summary["stats_key_problem"] = writer.key.problem
        summary["outputs"].update(export_files=writer.export_files(self.counts.kept),
                                  stats=writer.paths.stats if writer.split_keys else None)
        try:
            writer.finish(summary)
        except OSError as e:
            raise DjxError(f"could not move the finished outputs into place ({e}); every sample is saved in "
                           f"{writer.paths.state_dir}: fix the cause and run the same command again to finish") from None
        self.log(format_summary(summary))
        if not report.ok:
            raise CheckError(report.describe())
        self._refuse_systematic_rejection(state.records)
        share = self.counts.rejected / max(state.records, 1)
        if recipe.max_rejected_fraction is not None and share > recipe.max_rejected_fraction:
            raise DjxError(f"{self.counts.rejected} of {state.records} samples ({share:.1%}) were rejected, "
                           f"more than max_rejected_fraction {recipe.max_rejected_fraction}; the outputs are written: see "
                           f"{writer.paths.rejected} for the reasons")
        return summary

    def _refuse_systematic_rejection(self, records: int) -> None:
        """Nearly every sample rejected, for one reason or several together: the input does not match
        the recipe (images not where the records say, a text key that is not there). Not a success,
        whatever the codes; `max_rejected_fraction` replaces this rule with the user's own bound."""
        if self.recipe.max_rejected_fraction is not None:
            return
        why = systematic_rejection(self.counts.rejected_by_code, records, self.writer.paths.rejected)
        if why is not None:
            raise DjxError(why)

    def _save_progress(self) -> None:
        """Checkpoint the last batch written whole (a batch cut off half written is cut from the parts
        by the next run, which reads it again)."""
        _, read_at, counts, at = self.done
        counts = RunCounts.from_dict(counts)
        self._update_totals(counts)
        try:
            self.writer.checkpoint(self.start.checkpoint(read_at, counts), at=at)
        except OSError as e:  # never hide the error that stopped the run behind this one
            self.log(f"[djx] could not save progress ({e}); the next run resumes from the last checkpoint")
            return
        self.log(f"[djx] stopped after {read_at['records']} samples; they are saved and the same "
                 f"command resumes from there")

    def _stop_if(self, why: str | None) -> None:
        """Stop the run for a systematic failure: no export, no state to resume from."""
        if why is None:
            return
        self.writer.close()
        shutil.rmtree(self.writer.paths.state_dir, ignore_errors=True)
        self.done = None  # nothing to save on the way out: the state is gone on purpose
        raise DjxError(why)
