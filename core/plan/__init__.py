"""Before any work: the worker/device plan, preflight checks, resource probes."""
