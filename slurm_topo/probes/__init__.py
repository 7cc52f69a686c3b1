"""Probes run inside a ``slurm-topo calibrate`` step: the built-in TCP probe (:mod:`.tcp`).

:func:`tcp_task` is what ``slurm-topo probe tcp`` runs in each task of the two-task step: it reads its role
from Slurm (``SLURM_PROCID`` 0 serves, 1 measures), the serving node from ``SLURM_STEP_NODELIST`` (task 0 runs
on its first node) and prints one JSON line naming the node slurmd ran it on (``SLURMD_NODENAME``), which
calibrate checks against the pair it asked for.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Mapping

from ..core.errors import InputError
from ..core.hostlist import expand
from . import tcp

RECORD_KEY = "slurm_topo_probe"


def parse_addresses(items: tuple[str, ...] | list[str]) -> dict[str, str]:
    """``NODE=ADDRESS`` items (``--address``) -> a mapping."""
    out: dict[str, str] = {}
    for item in items:
        node, sep, address = item.partition("=")
        if not sep or not node or not address or len(item) > 300:
            raise InputError(f"--address: {item[:60]!r} is not NODE=ADDRESS")
        out[node] = address
    return out


def tcp_task(
    env: Mapping[str, str],
    *,
    port: int,
    addresses: Mapping[str, str],
    nbytes: int = tcp.DEFAULT_BYTES,
    repeats: int = tcp.DEFAULT_REPEATS,
    pings: int = tcp.DEFAULT_PINGS,
    bind: str = "0.0.0.0",
    timeout: float = 120.0,
) -> str:
    """Run this task's side of the TCP probe; the JSON line it reports."""
    try:
        rank = int(env["SLURM_PROCID"])
        step_nodes = expand(env["SLURM_STEP_NODELIST"])
    except (KeyError, ValueError):
        raise InputError(
            "probe tcp: run it as a two-task srun step (SLURM_PROCID and SLURM_STEP_NODELIST unset); "
            "slurm-topo calibrate starts it"
        ) from None
    node = env.get("SLURMD_NODENAME") or socket.gethostname()
    server_node = step_nodes[0]
    record: dict[str, object] = {RECORD_KEY: "serve" if rank == 0 else "measure", "node": node}
    if rank == 0:
        with tcp.listen(port, bind) as server:
            record["bytes_received"] = tcp.serve(server, timeout=timeout)
    elif rank == 1:
        address = addresses.get(server_node, server_node)
        with tcp.connect(address, port, deadline_s=timeout) as sock:
            result = tcp.measure(sock, nbytes=nbytes, repeats=repeats, pings=pings)
        record |= {"server": server_node, "address": address, **result.as_dict()}
    else:
        raise InputError(f"probe tcp: task {rank}: the step must have two tasks")
    return json.dumps(record, sort_keys=True)
