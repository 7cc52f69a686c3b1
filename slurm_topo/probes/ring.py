"""A ring all-reduce in plain Python over TCP: the communication of one data-parallel step, as NCCL's and
gloo's ring runs it, to check the cost model's prediction against a real run (``slurm-topo probe ring``).

``p`` tasks of one srun step (one per node), rank ``r`` on the step's ``r``-th node: each listens on
``port``, accepts its predecessor and connects to its successor, then runs ``2(p-1)`` steps, each sending
``nbytes/p`` to the successor while receiving as much from the predecessor (reduce-scatter, then all-gather;
the reduction itself is left out: this measures the wire, which is what the model predicts). A token around
the ring starts every repeat on all ranks together. Rank 0 reports the median seconds of ``repeats`` runs.
"""

from __future__ import annotations

import json
import socket
import statistics
import threading
import time
from collections.abc import Callable, Mapping

from ..core.errors import CommandError, InputError
from ..core.hostlist import expand
from . import RECORD_KEY
from .tcp import CHUNK, connect, listen


def _send(sock: socket.socket, n: int, payload: memoryview) -> None:
    left = n
    while left:
        part = payload[: min(left, len(payload))]
        sock.sendall(part)
        left -= len(part)


def _recv(sock: socket.socket, n: int, buf: bytearray) -> None:
    view = memoryview(buf)
    left = n
    while left:
        k = sock.recv_into(view, min(left, len(view)))
        if k == 0:
            raise ConnectionError(f"peer closed with {left} bytes to go")
        left -= k


def allreduce(
    succ: socket.socket,
    pred: socket.socket,
    p: int,
    nbytes: int,
    clock: Callable[[], float] = time.perf_counter,
) -> float:
    """One ring all-reduce's traffic over the connected sockets; its seconds on this rank."""
    chunk = max(1, nbytes // p)
    payload = memoryview(bytes(min(chunk, CHUNK)))
    buf = bytearray(min(chunk, CHUNK))
    failed: list[BaseException] = []

    def send() -> None:
        try:
            _send(succ, chunk, payload)
        except BaseException as exc:  # re-raised by the receiving thread
            failed.append(exc)

    t0 = clock()
    for _ in range(2 * (p - 1)):
        sender = threading.Thread(target=send, daemon=True)
        sender.start()
        _recv(pred, chunk, buf)
        sender.join()
        if failed:
            raise failed[0]
    return clock() - t0


def _token(succ: socket.socket, pred: socket.socket, rank: int) -> None:
    """Once around the ring: rank 0 starts it and returns when it came back (every rank is ready)."""
    if rank == 0:
        succ.sendall(b"t")
        if pred.recv(1) != b"t":
            raise ConnectionError("the ring's token did not come back")
    else:
        if pred.recv(1) != b"t":
            raise ConnectionError("no token from the predecessor")
        succ.sendall(b"t")


def ring_task(
    env: Mapping[str, str],
    *,
    port: int,
    addresses: Mapping[str, str],
    nbytes: int,
    repeats: int = 3,
    bind: str = "0.0.0.0",
    timeout: float = 120.0,
) -> str:
    """This task's part of the ring; the JSON line it reports (rank 0: the measured seconds)."""
    try:
        rank = int(env["SLURM_PROCID"])
        nodes = expand(env["SLURM_STEP_NODELIST"])
        p = int(env["SLURM_NTASKS"])
    except (KeyError, ValueError):
        raise InputError("probe ring: run it as an srun step, one task per node") from None
    if p != len(nodes) or p < 2:
        raise InputError(f"probe ring: {p} tasks on {len(nodes)} nodes: one task per node, two nodes or more")
    successor = nodes[(rank + 1) % p]
    with listen(port, bind) as server:
        server.settimeout(timeout)
        succ = connect(addresses.get(successor, successor), port, deadline_s=timeout)
        try:
            pred, _ = server.accept()
        except TimeoutError:
            succ.close()
            raise CommandError(["probe", "ring"], None, f"no predecessor within {timeout:g} s") from None
    with succ, pred:
        for s in (succ, pred):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            s.settimeout(timeout)
        runs = []
        for _ in range(repeats):
            _token(succ, pred, rank)
            runs.append(allreduce(succ, pred, p, nbytes))
        _token(succ, pred, rank)  # nobody closes before everyone is done
    record: dict[str, object] = {RECORD_KEY: "ring", "node": env.get("SLURMD_NODENAME", ""), "rank": rank}
    if rank == 0:
        record |= {"ranks": p, "bytes": nbytes, "seconds": statistics.median(runs), "runs": runs}
    return json.dumps(record, sort_keys=True)
