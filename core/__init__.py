"""The djx framework. Knows no concrete op: built-in ops are found through the registry.

    errors.py      errors a user can hit, each saying what to change
    records.py     the values that cross process, engine and module boundaries
    pipeline.py    the Python API and the one run path (recipe -> plan -> executor -> ledger)
    recipe/        what the user writes: recipe keys, Data-Juicer compatibility, building ops, RunContext
    op/            the plug-in contract: Op/Filter/Mapper/Deduplicator/Batch, params, registry, drop reasons, images
    io/            samples in and out: datasets, readers, record limits, writers, outputs, reading outputs
    run/           one batch through the ops and the run's books: chain, ledger, resume, checks, summary
    dedup/         the whole-dataset part of deduplicators: indexes, and the phase after the streaming pass
    plan/          before any work: workers and devices, preflight checks, resources
    models/        one copy of each model per device: pool, dtypes, OOM back-off, weight sharing
    executors/     the engines behind one contract: base.py, local/ (processes), ray/ (Ray Data)

registry.py, model_pool.py and output_reader.py here are the old import paths, kept for plug-ins.
"""
