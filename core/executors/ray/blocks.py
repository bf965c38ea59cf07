"""The Ray executor's input: Ray Data reads and parses (read.py, jsonl_source.py) and hands the
driver the parsed rows in tables of one batch, in input order."""
from __future__ import annotations

from typing import Iterator

import pyarrow as pa

from djx.core.executors.ray.read import file_index, parse_lines, parse_rows
from djx.core.io.readers import ReadState

BLOCK_ROWS, BLOCK_BYTES = 1024, 16 << 20  # the most a block from Ray Data holds (block_rows)


def parsed_blocks(ray, files: list[str], state: ReadState, cpus: float, ctx, keep_orig: bool, batch_size: int,
                  max_record_bytes: int) -> Iterator[pa.Table]:
    """The input parsed (Ray Data: a read task, parse tasks declaring `cpus` each) in tables of
    `batch_size` rows at most, in input order, from the reader's position `state` (a resumed run
    starts in its current file, at its offset). `ctx`: the run's context with on_error: reject (the
    driver enforces fail); `keep_orig`: rows keep the input record for stages to reject against."""
    import warnings

    from ray.data import DataContext

    from djx.core.executors.ray.cluster import settle_fsspec_http
    with warnings.catch_warnings():  # Ray sets and copies its own deprecated context fields
        warnings.simplefilter("ignore", DeprecationWarning)
        old = DataContext.get_current()
        data_ctx = old.copy()
        data_ctx.execution_options.preserve_order = True  # results come back in input order
        data_ctx.enable_progress_bars = False             # the pipeline draws its own
        data_ctx.print_on_execution_start = False
        DataContext._set_current(data_ctx)                # datasets built now carry this context
        try:
            parse = {"ctx": ctx, "keep_orig": keep_orig}
            settle_fsspec_http()
            if files[0].lower().endswith(".parquet"):
                many = len(files) > 1
                ds = ray.data.read_parquet(files, partitioning=None, num_cpus=cpus, include_paths=many)
                parse["index"] = file_index(files) if many else None
            else:
                from djx.core.executors.ray.jsonl_source import JsonLines
                ds = ray.data.read_datasource(JsonLines(files[state.file:], state.offset, state.file,
                                                        max_record_bytes), num_cpus=cpus)
                parse["max_record_bytes"] = max_record_bytes
            ds = ds.map_batches(parse_lines if "max_record_bytes" in parse else parse_rows, fn_kwargs=parse,
                                batch_size=None, batch_format="pyarrow", num_cpus=cpus)
            # blocks of whole batches (a read gathers up to 128 MiB), which the driver fetches one at a
            # time when ready, none ahead, and cuts into batches (rebatched): a fetch costs Ray Data
            # ~0.1 s on 2 busy cores, so a block of one batch of 64 capped a text run at ~650 samples/s
            ds = ds.repartition(target_num_rows_per_block=block_rows(files[0], batch_size))
        finally:
            DataContext._set_current(old)
    return rebatched(ds.iter_batches(batch_size=None, batch_format="pyarrow", prefetch_batches=0), batch_size)


def block_rows(path: str, batch_size: int) -> int:
    """Rows of a block Ray Data hands the driver: a whole number of batches, BLOCK_ROWS at most and
    about BLOCK_BYTES of input at most (the record size from the first file's first MiB of lines, or
    a parquet file's row groups); one batch where that cannot be read (the read then says why)."""
    from djx.core.io.regular_file import open_input
    try:
        if path.lower().endswith(".parquet"):
            import pyarrow.parquet as pq
            meta = pq.ParquetFile(path).metadata
            per_row = sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups)) / max(meta.num_rows, 1)
        else:
            with open_input(path) as f:
                head = f.read(1 << 20)
            per_row = len(head) / max(head.count(b"\n"), 1)
    except Exception:  # noqa: BLE001  unreadable or damaged: the read reports it
        return batch_size
    return batch_size * max(1, min(BLOCK_ROWS // batch_size, int(BLOCK_BYTES // max(per_row * batch_size, 1))))


def rebatched(tables, size: int) -> Iterator[pa.Table]:
    """The rows of `tables`, in order, in tables of exactly `size` rows (the last: the rest), as the
    local reader cuts batches. Ray Data's re-blocking keeps each read block's tail apart (a read
    block of 25 rows at batch_size 8 came out as 8, 8, 8, 1). Closing it closes `tables`."""
    parts, held = [], 0
    try:
        for table in tables:
            while table.num_rows:
                take = min(size - held, table.num_rows)
                parts.append(table.slice(0, take))
                table, held = table.slice(take), held + take
                if held == size:
                    yield pa.concat_tables(parts) if len(parts) > 1 else parts[0]
                    parts, held = [], 0
        if held:
            yield pa.concat_tables(parts) if len(parts) > 1 else parts[0]
    finally:
        if hasattr(tables, "close"):
            tables.close()
