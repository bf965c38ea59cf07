"""One copy of a model's weights per machine, mapped read-only by every worker on it.

The first process that needs a model loads it with its loader, then splits the result into a
*skeleton* (the loaded object, every parameter and buffer replaced by a meta tensor, pickled) and
its *tensors*. Every process, the first included, rebuilds the model from the skeleton and
tensors it did not copy:

- local workers: the tensors are saved once in a run folder under /dev/shm and memory-mapped
  (`torch.load(mmap=True)`), so all workers read the same page-cache pages;
- GPU workers: a weight owner process per device serves CUDA IPC handles of its one copy
  (gpu_owner.py);
- Ray actors: the driver puts the tensors as numpy arrays in the object store once per run, and
  each actor reads them zero-copy from the node's shared memory.

Tied weights stay tied (one tensor per object, however many slots hold it) and non-persistent
buffers (absent from a state dict) travel too, since every slot of every module is recorded.

A run folder is named after its owner (pid and process start time): a run killed with kill -9
leaves it behind, and the next run removes the folders whose owner is gone (`remove_stale`).

    weight_share.py  WeightShare: how a worker finds the shared copy (the value passed to workers)
    split.py         a loaded model <-> a pickled skeleton + its tensors
    folder.py        the run folder under /dev/shm: private to this user, signed skeletons, write once, map
    gpu_owner.py     the weight owner process of a GPU, serving CUDA IPC handles
    ray_store.py     the Ray object-store payload CPU actors read zero-copy
"""

