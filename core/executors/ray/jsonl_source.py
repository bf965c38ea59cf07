"""The Ray executor's JSON Lines datasource, apart from read.py: defining it imports Ray Data (0.7
CPU-seconds), which the driver does in a thread while Ray starts (cluster.importing_ray_data), not
on start-up's path before it."""
from __future__ import annotations

from ray.data.datasource import FileBasedDatasource

from djx.core.executors.ray.read import BLOCK_BYTES, BLOCK_LINES, MiB, lines_table, file_index, lookup_file, split_lines
from djx.core.io.record_limits import MAX_RECORD_BYTES


class JsonLines(FileBasedDatasource):
    """A JSON Lines file as its lines, split on b"\\n" only and kept as bytes with their newline:
    what the local reader sees. (read_text splits with str.splitlines, which also breaks lines at
    \\r, U+0085 and U+2028, all valid inside a JSON line, and fails the whole file on bad UTF-8.)"""

    def __init__(self, files: list[str], start: int = 0, first: int = 0, max_record_bytes: int = MAX_RECORD_BYTES,
                 **kwargs):
        super().__init__(files, **kwargs)
        self.max_record_bytes = max_record_bytes  # a longer line is rejected, as the local reader does
        self.start = start  # a resumed run's read offset (a line start) in its first file
        self.first = first  # the dataset index of files[0] (a resumed run skips finished files)
        self.index = file_index(files, first)

    def _read_stream(self, f, path: str):
        file = lookup_file(self.index, path)
        skip = self.start if file == self.first else 0
        at = skip
        while skip > 0:  # a sequential stream: read past the part already done
            got = len(f.read(min(skip, 4 * MiB)))
            if not got:
                return
            skip -= got
        lines, starts, over, size = [], [], [], 0
        for line, start, too_big in split_lines(f, at, self.max_record_bytes):
            lines.append(line)
            starts.append(start)
            over.append(too_big)
            size += len(line)
            if len(lines) >= BLOCK_LINES or size >= BLOCK_BYTES:
                yield lines_table(lines, starts, over, file)
                lines, starts, over, size = [], [], [], 0
        if lines:
            yield lines_table(lines, starts, over, file)
