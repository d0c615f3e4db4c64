"""Data-parallel ops whose results are bitwise those of one process, for any number of ranks.

* :mod:`.kmeans`  :func:`kmeans`: each rank holds a shard of whole groups of the chunked sum tree; the ranks
  all-gather their group sums and every rank adds them in global group order, so centres, memberships, loop
  count and delta history are ``gpuopt.kmeans(x, k, variant="cpu", summation="chunked")``'s.
  :func:`kmeans_group_sums` (a shard's group sums), :func:`shard_bounds` (a split that fits),
  :func:`sum_group` (the group size, 32,768 rows).
* :mod:`.comm`  the collectives it needs (:class:`Communicator`: all_gather, broadcast, fail) and
  :class:`ThreadGroup` (ranks as threads of one process); :class:`CollectiveError`, raised on every rank when
  one fails or a collective times out.
* :mod:`.torch_comm`  :class:`TorchCommunicator` over a ``torch.distributed`` process group (torch optional:
  imported when one is made).

On GPUs (:mod:`.kmeans_device`, csrc/kmeans/kmeans_multi.cu) a rank runs the single-GPU loop's kernels over its
shard and closes each loop on the device; the slots travel over NCCL device to device under a TorchCommunicator
(notes/kmeans.md, "Past one GPU"). :mod:`.cli`: Liao's command line under ``torchrun``.
"""

from __future__ import annotations

from .comm import CollectiveError, Communicator, ThreadGroup
from .kmeans import kmeans, kmeans_group_sums, shard_bounds, sum_group
from .torch_comm import TorchCommunicator

__all__ = ["kmeans", "kmeans_group_sums", "shard_bounds", "sum_group", "Communicator", "ThreadGroup",
           "TorchCommunicator", "CollectiveError"]
