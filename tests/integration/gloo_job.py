"""A real torch.distributed (gloo) job for the shaped testbed, run once per task by ``gpulayer-srun``.

``python gloo_job.py STORE OP[+OP…] BYTES:REPEATS[,…]`` — every rank joins one gloo group
(rendezvous in the file ``STORE`` on the shared file system; ``RANK``/``WORLD_SIZE`` from gpulayer-srun's
shim, else Slurm's own; gloo's sockets on the namespace's ``eth0``, the shaped veth), then per size:

* ``allreduce``: a float32 all-reduce of BYTES (torch's gloo ring), timed as NCCL-tests time it: a batch of
  back-to-back operations after a barrier, seconds per operation = batch time / batch length; REPEATS
  batches;
* ``chain``: a send/recv chain in rank order (rank r receives BYTES from r-1, then sends them to r+1: one
  pipeline's activations crossing every stage boundary one after the other); rank 0 stamps the start before
  its send, the last rank the end after its receive, on CLOCK_MONOTONIC, which every process of the host
  shares (no time namespaces here); a barrier between chains; REPEATS chains.

Each rank writes ``STORE.rank<N>.json``: its rank, ``SLURMD_NODENAME`` (where Slurm really ran it), and per
OP and size its per-operation seconds (allreduce) or its stamps (chain). Warm-up operations come first and
are not counted (gloo connects its pairs lazily on first use).
"""

from __future__ import annotations

import json
import os
import sys
import time
from datetime import timedelta
from typing import Any


def _batch(bytes_: int) -> int:
    """Operations per timed batch: 20 small ones (a batch of a few ms, short enough that most batches
    meet no other process of the shared machine), one large one."""
    return max(1, min(20, 2_000_000 // max(bytes_, 1)))


def main(argv: list[str]) -> int:
    import warnings

    warnings.filterwarnings("ignore", message="Failed to initialize NumPy")  # torch's CPU wheel without numpy
    import torch
    import torch.distributed as dist

    store, ops_text, sizes_text = argv
    sizes = [tuple(int(x) for x in s.split(":")) for s in sizes_text.split(",")]
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "eth0")
    # gpulayer-srun's shim sets RANK and WORLD_SIZE; a plain srun step (a job's one-node α step) Slurm's own
    rank = int(os.environ.get("RANK", os.environ.get("SLURM_PROCID", "0")))
    world = int(os.environ.get("WORLD_SIZE", os.environ.get("SLURM_NTASKS", "1")))
    dist.init_process_group(
        "gloo", init_method=f"file://{store}", rank=rank, world_size=world, timeout=timedelta(seconds=90)
    )
    results: dict[str, dict[str, object]] = {}
    for op in ops_text.split("+"):
        for nbytes, repeats in sizes:
            buf = torch.ones(max(1, nbytes // 4), dtype=torch.float32)
            run = (
                _allreduce(dist, buf, repeats)
                if op == "allreduce"
                else _chain(dist, buf, rank, world, repeats)
            )
            results.setdefault(op, {})[str(nbytes)] = run
        dist.barrier()
    dist.destroy_process_group()
    out = {"rank": rank, "world": world, "node": os.environ.get("SLURMD_NODENAME", ""), "results": results}
    with open(f"{store}.rank{rank}.json", "w") as f:  # one file a rank: srun's lines would interleave
        json.dump(out, f)
    return 0


def _allreduce(dist: Any, buf: Any, repeats: int) -> list[float]:
    k = _batch(buf.numel() * 4)
    for _ in range(3):
        dist.all_reduce(buf)
    per_op = []
    for _ in range(repeats):
        dist.barrier()
        t0 = time.monotonic()
        for _ in range(k):
            dist.all_reduce(buf)
        per_op.append((time.monotonic() - t0) / k)
    return per_op


def _chain(dist: Any, buf: Any, rank: int, p: int, repeats: int) -> list[list[float]]:
    stamps: list[list[float]] = []
    for i in range(repeats + 2):  # the first two chains warm up every pair
        dist.barrier()
        start = time.monotonic()
        if rank > 0:
            dist.recv(buf, src=rank - 1)
        if rank < p - 1:
            dist.send(buf, dst=rank + 1)
        end = time.monotonic()
        if i >= 2:
            stamps.append([start, end])
    return stamps


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
