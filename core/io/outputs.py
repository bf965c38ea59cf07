"""Output files and the resume state.

While a run works, kept/dropped/rejected records go to part files in a state folder next to the
export; a manifest (written atomically) records how far the input was read and the byte length of
each part file at the last checkpoint. A resumed run truncates the parts to those lengths and
reads on from there, so nothing is redone or duplicated. At the end the parts are renamed into
place: a half-written export never carries the final name.

No other user can change the export folder or any folder above it (io/folder_trust.py: a shared
one is sticky, as /tmp); even so, nothing in it is trusted by its name: the state folder is used
only when it is this user's private folder, its files only when they are this user's regular
files (io/private_files.py), and the manifest only when this user's key signed it (io/user_key.py): it holds each part's
digest at its length, checked before a run resumes or completes from it. A state someone else
wrote, or a part changed since its checkpoint, is refused, never resumed into.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass

from djx.core.errors import ResumeError
from djx.core.io.durable import sha256_of, write_durable
from djx.core.io.export_lock import ExportLock
from djx.core.io.private_files import create_new, open_own, private_folder
from djx.core.io.user_key import UserKey, mac, signed
from djx.core.io.writers import count_records, encode_line, existing_shards, export_format, shard_names, write_part


@dataclass(frozen=True)
class OutputPaths:
    export: str
    dropped: str
    rejected: str
    summary: str
    state_dir: str
    stats: str = ""      # the stats file, written when keep_stats_in_res_ds is false
    fmt: str = ".jsonl"  # the export's format, from its suffix

    @classmethod
    def for_export(cls, export_path: str) -> "OutputPaths":
        folder, name = os.path.split(os.path.abspath(export_path))
        fmt = export_format(name)
        stem = name[:-len(fmt)]
        join = lambda suffix: os.path.join(folder, stem + suffix)  # noqa: E731
        return cls(export=os.path.abspath(export_path), dropped=join(".dropped" + fmt),
                   rejected=join(".rejected" + fmt), summary=join(".summary.json"),
                   state_dir=os.path.join(folder, f".{stem}.djx-state"), stats=join("_stats.jsonl"), fmt=fmt)


class OutputWriter:
    """Appends records to the part files; `checkpoint` makes the state durable."""

    KINDS = ("kept", "dropped", "rejected")

    def __init__(self, paths: OutputPaths, export_dropped: bool = True, keep_stats: bool = True,
                 shard_size: int = 0, training_ready: bool = False, key: UserKey | None = None,
                 input_files: list[str] | None = None):
        self.paths, self.input_files = paths, input_files  # a parquet export keeps their column types
        self.key = key or UserKey(b"", "", "no key was given to the writer")  # signs the manifest
        self.export_dropped = export_dropped
        self.keep_stats, self.shard_size = keep_stats, shard_size  # of the kept samples' export
        # djx's keys leave the exported records for the stats file (`__dj__stats__` stays when kept):
        # without stats, or an export meant for training as it is (a LLaVA export)
        self.split_keys = training_ready or not keep_stats
        self._files = {}
        self._hashes = {}  # kind -> sha256 of the part as written so far
        self._manifest: dict = {}  # the last one written
        self.export_lock = ExportLock(paths.state_dir, paths.export)
        self.manifest_path = os.path.join(paths.state_dir, "manifest.json")
        self._state_summary = os.path.join(paths.state_dir, "summary.json")  # a finish's, until it is moved

    def part(self, kind: str) -> str:
        return os.path.join(self.paths.state_dir, f"{kind}.jsonl.part")

    def load_manifest(self) -> dict | None:
        """The unfinished run's manifest (None: there is none), refused unless this user's key signed it."""
        if not os.path.lexists(self.paths.state_dir):
            return None
        private_folder(self.paths.state_dir)
        try:
            with os.fdopen(open_own(self.manifest_path), encoding="utf-8") as f:
                manifest = json.load(f)
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as e:
            raise ResumeError(f"resume state {self.manifest_path} is unreadable ({e}); "
                              f"run again with --restart to start over") from None
        sig = manifest.pop("sig", None) if isinstance(manifest, dict) else None
        if not self.key.key:
            raise ResumeError(f"resume state {self.manifest_path} cannot be checked without this user's key: "
                              f"{self.key.problem}; or run again with --restart to start over")
        if not signed(self.key.key, manifest, sig):
            raise ResumeError(f"resume state {self.manifest_path} is not signed with this user's key (another user "
                              f"may have written it), so djx will not resume or complete it: run again with "
                              f"--restart to start over")
        return manifest

    def lock(self) -> None:
        """Hold the export for this process (io/export_lock.py): before the manifest is read, to
        the end of the finish. A no-op when it is held already."""
        self.export_lock.acquire()

    def release(self) -> None:
        self.export_lock.release()

    def held(self) -> ExportLock:
        """The export locked (`lock`), as a context manager that releases it at the end."""
        self.lock()
        return self.export_lock

    def open(self, manifest: dict | None) -> None:
        """Start fresh (manifest None) or reopen the parts cut back to the manifest's lengths."""
        self.lock()
        if manifest is None and os.path.exists(self.manifest_path):
            os.remove(self.manifest_path)
        elif (manifest or {}).get("dedup", {}).get("stage") == "move":  # stopped while moving duplicates
            self.move_duplicates()
        try:
            for kind in self.KINDS:
                if manifest is None:
                    self._files[kind] = os.fdopen(create_new(self.part(kind)), "r+b")
                    self._hashes[kind] = hashlib.sha256()
                    continue
                f = self._reopen(kind)
                self._hashes[kind] = self._checked(kind, f, manifest)
                f.truncate(manifest["lengths"][kind])
                f.seek(0, os.SEEK_END)
        except BaseException:
            self.close()
            self.release()
            raise

    def _checked(self, kind: str, f, manifest: dict):
        """The sha256 of the part's first `lengths[kind]` bytes, which must be the manifest's digest."""
        length, digest = (manifest.get("lengths") or {}).get(kind, 0), (manifest.get("digests") or {}).get(kind)
        h = sha256_of(f, length)
        if h is None:
            raise ResumeError(f"resume state {self.paths.state_dir} is damaged: {self.part(kind)} is shorter "
                              f"than its last checkpoint; run again with --restart to start over")
        if h.hexdigest() != digest:
            raise ResumeError(f"resume state {self.paths.state_dir}: {self.part(kind)} changed since its last "
                              f"checkpoint (its digest differs), so djx will not resume or complete it: run again "
                              f"with --restart to start over")
        return h

    def _reopen(self, kind: str):
        """The part file of `kind`, opened to go on writing; one removed (to free space, say) is a damaged state."""
        try:
            self._files[kind] = f = os.fdopen(open_own(self.part(kind), os.O_RDWR), "r+b")
        except FileNotFoundError:
            raise ResumeError(f"resume state {self.paths.state_dir} is damaged: {self.part(kind)} is missing; "
                              "run again with --restart to start over") from None
        return f

    def write(self, kind: str, records: list[dict]) -> None:
        if records:  # lines a worker encoded (bytes, newline included), or dicts
            data = b"".join(r if isinstance(r, bytes) else encode_line(r) for r in records)
            self._hashes[kind].update(data)
            self._files[kind].write(data)

    def move_duplicates(self) -> None:
        """Put the dedup phase's new kept and dropped parts in place of the old. Each replace is
        atomic and happens once, so a run stopped anywhere in here redoes the rest."""
        for kind in ("kept", "dropped"):
            if kind in self._files:
                self._files.pop(kind).close()
        for kind in ("kept", "dropped"):
            if os.path.exists(self.part(kind + ".dedup")):
                os.replace(self.part(kind + ".dedup"), self.part(kind))
        if self._files:  # the run goes on writing: reopen the two parts at their ends
            for kind in ("kept", "dropped"):
                self._hashes[kind] = sha256_of(self._reopen(kind))
                self._files[kind].seek(0, os.SEEK_END)

    def position_after_dedup(self, before: dict) -> dict:
        """`before` (a position()) with the dedup phase's new kept and dropped parts: signed before the move."""
        lengths, digests = dict(before["lengths"]), dict(before["digests"])
        for kind in ("kept", "dropped"):
            with open(self.part(kind + ".dedup"), "rb") as f:
                lengths[kind], digests[kind] = os.fstat(f.fileno()).st_size, sha256_of(f).hexdigest()
        return {"lengths": lengths, "digests": digests}

    def position(self) -> dict:
        """Each part's length as written so far (buffered bytes included) and the digest of its
        content: what a checkpoint records."""
        return {"lengths": {k: f.tell() for k, f in self._files.items()},
                "digests": {k: h.hexdigest() for k, h in self._hashes.items()}}

    def checkpoint(self, manifest: dict, at: dict | None = None) -> None:
        """Make the parts durable and record the manifest, signed, with their lengths and digests
        (now, or `at`: an earlier `position()`, when the parts hold a batch cut off half written)."""
        for f in self._files.values():
            f.flush()
            os.fsync(f.fileno())
        self._write_manifest({**manifest, **(self.position() if at is None else at)})

    def _write_manifest(self, manifest: dict) -> None:
        manifest = json.loads(json.dumps(manifest, default=str))  # signed as it will be read back
        self._manifest = dict(manifest)
        sig = mac(self.key.key, manifest)
        write_durable(self.manifest_path, {**manifest, "sig": sig} if sig else manifest)

    def close(self) -> None:
        """Close the part files (the lock stays until `release`)."""
        for f in self._files.values():
            f.close()
        self._files.clear()

    def finish(self, summary: dict) -> None:
        """Move the parts into place with the summary; drop the state folder. Crash-safe: the
        summary and a `finishing` mark are made durable in the state first, so a run killed at any
        instant after that is completed by the next one (`complete`), never redone or padded."""
        self.close()
        digest = write_durable(self._state_summary, summary)
        self._write_manifest({**self._manifest, "finishing": True, "summary": digest})
        self.complete()

    def complete(self) -> None:
        """The moves of a finish; each is atomic and done at most once, so any rerun may redo this."""
        os.makedirs(os.path.dirname(self.paths.export), exist_ok=True)
        moves = {"kept": self.paths.export, "rejected": self.paths.rejected}
        if self.export_dropped:
            moves["dropped"] = self.paths.dropped
        elif os.path.exists(self.paths.dropped):
            os.remove(self.paths.dropped)  # an old run's file would contradict this summary
        if os.path.exists(self.part("kept")):  # an earlier run's files would contradict this one's
            self._remove_stale_exports()
        for kind, dest in moves.items():
            if os.path.exists(self.part(kind)):
                self._materialize(kind, dest)
        if os.path.exists(self._state_summary):
            os.replace(self._state_summary, self.paths.summary)
        for name in os.listdir(self.paths.state_dir):  # the manifest goes last: while it is
            if name != "manifest.json":                # there, a rerun can complete this
                os.remove(os.path.join(self.paths.state_dir, name))
        os.remove(self.manifest_path)
        shutil.rmtree(self.paths.state_dir, ignore_errors=True)

    def export_files(self, kept: int) -> list[str]:
        """The files the kept samples will be exported to (one, or the shards), once every
        part is written; `kept` is their number."""
        if self.shard_size <= 0:
            return [self.paths.export]
        size = os.path.getsize(self.part("kept")) if os.path.exists(self.part("kept")) else 0
        return shard_names(self.paths.export, max(1, min(size // self.shard_size + 1, kept)))

    def _remove_stale_exports(self) -> None:
        stale = existing_shards(self.paths.export) + [self.paths.export]
        if not self.split_keys:
            stale.append(self.paths.stats)
        for path in stale:
            if os.path.exists(path):
                os.remove(path)

    def _materialize(self, kind: str, dest: str) -> None:
        """Write one part file as its final output(s), then remove it. Plain JSON Lines with
        stats is a rename; any other format, a stats file or shards are written from the part."""
        part = self.part(kind)
        split_stats, shards = kind == "kept" and self.split_keys, kind == "kept" and self.shard_size > 0
        if self.paths.fmt == ".jsonl" and not split_stats and not shards:
            os.replace(part, dest)
            return
        files = self.export_files(count_records(part)) if shards else [dest]
        write_part(part, files, self.paths.fmt, self.paths.stats if split_stats else None, self.keep_stats,
                   like=self.input_files)
        os.remove(part)

    def complete_interrupted(self, manifest: dict, log=print) -> dict:
        """Complete the finish of a run that was stopped inside it (`manifest`, as load_manifest
        checked it); its summary. Each file still to move must be the one the manifest names."""
        self.lock()
        try:
            for kind in self.KINDS:
                try:
                    with os.fdopen(open_own(self.part(kind)), "rb") as f:
                        self._checked(kind, f, manifest)
                        if f.read(1):  # moved into place whole: not one byte past the digest
                            raise ResumeError(f"resume state {self.paths.state_dir}: {self.part(kind)} grew since "
                                              f"the run finished, so djx will not complete it: run again with --restart")
                except FileNotFoundError:
                    continue  # moved into place before the stop
            try:
                with os.fdopen(open_own(self._state_summary), "rb") as f:
                    if hashlib.sha256(f.read()).hexdigest() != manifest.get("summary"):
                        raise ResumeError(f"resume state {self.paths.state_dir}: its summary changed since the run "
                                          f"finished, so djx will not complete it: run again with --restart")
            except FileNotFoundError:
                pass
            self.complete()
        finally:
            self.release()
        log(f"[djx] the last run had finished and was stopped while moving its outputs into place; "
            f"completed that: {self.paths.export}")
        with open(self.paths.summary, encoding="utf-8") as f:
            return json.load(f)

