"""The built-in TCP probe: bandwidth and latency between two tasks, with nothing but Python's sockets.

One task serves (:func:`serve`), the other measures (:func:`measure`); ``slurm-topo probe tcp`` runs the
right one in each task of a two-task ``srun`` step (``SLURM_PROCID`` 0 serves, 1 measures and prints one
JSON line). The protocol, one connection, every message answered before the next::

    client -> server   b"P"                      ping; the server answers b"p"
    client -> server   b"B" + 8-byte length      then that many bytes; the server answers b"b" at the end
    client -> server   b"Q"                      done; the server closes

Latency is half the median round trip of ``pings`` one-byte ping-pongs (``TCP_NODELAY``); bandwidth is the
median over ``repeats`` of ``nbytes`` sent and acknowledged divided by the time it took, less one round trip
(the acknowledgement's). The clock is injected (``clock``): tests hand one that counts calls.

What it measures is the path between the two hosts' TCP stacks (kernel, NIC, switches); it cannot see GPU
links (NVLink, PCIe between GPUs): those need ``all_reduce_perf`` (:mod:`slurm_topo.probes.parse`).
"""

from __future__ import annotations

import socket
import statistics
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass

from ..core.errors import CommandError

CHUNK = 1 << 20
DEFAULT_BYTES = 64 << 20
DEFAULT_PINGS = 200
DEFAULT_REPEATS = 5
MAX_BYTES = 1 << 36  # 64 GiB: a typo in --bytes must not run for an hour


@dataclass(frozen=True, slots=True)
class TcpResult:
    """One pair's measurement: ``bandwidth`` GB/s (1e9 bytes/s, one direction), ``latency_us`` one way."""

    bandwidth: float
    latency_us: float
    nbytes: int
    repeats: int
    pings: int
    bandwidths: tuple[float, ...]
    """Each repeat's GB/s, in order (the spread shows how steady the path was)."""

    def as_dict(self) -> dict[str, object]:
        return {
            "probe": "tcp",
            "bandwidth": self.bandwidth,
            "latency_us": self.latency_us,
            "bytes": self.nbytes,
            "repeats": self.repeats,
            "pings": self.pings,
            "bandwidths": list(self.bandwidths),
        }


def _tune(sock: socket.socket) -> None:
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def listen(port: int, bind: str = "0.0.0.0") -> socket.socket:
    """A listening socket on ``bind``:``port`` (0: any free port; read it from ``getsockname()``)."""
    family = socket.AF_INET6 if ":" in bind else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((bind, port))
    except OSError as exc:
        sock.close()
        raise CommandError(
            ["probe", "tcp", "serve"], None, f"cannot listen on {bind}:{port}: {exc}"
        ) from None
    sock.listen(1)
    return sock


def serve(server: socket.socket, timeout: float = 120.0) -> int:
    """Answer one client on the listening ``server`` until it says ``Q``; the bytes received."""
    server.settimeout(timeout)
    try:
        conn, _ = server.accept()
    except TimeoutError:
        raise CommandError(["probe", "tcp", "serve"], None, f"no client within {timeout:g} s") from None
    total = 0
    buf = bytearray(CHUNK)
    with conn:
        conn.settimeout(timeout)
        _tune(conn)
        while True:
            op = conn.recv(1)
            if op in (b"", b"Q"):
                return total
            if op == b"P":
                conn.sendall(b"p")
            elif op == b"B":
                (n,) = struct.unpack("!Q", _bytes(conn, 8))
                if n > MAX_BYTES:
                    raise CommandError(["probe", "tcp", "serve"], None, f"client asked for {n} bytes")
                left = n
                while left:
                    k = conn.recv_into(buf, min(left, CHUNK))
                    if k == 0:
                        raise ConnectionError(f"client closed with {left} bytes to go")
                    left -= k
                total += n
                conn.sendall(b"b")
            else:
                raise CommandError(["probe", "tcp", "serve"], None, f"unknown request {op!r}")


def _bytes(sock: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        part = sock.recv(n - len(out))
        if not part:
            raise ConnectionError(f"peer closed after {len(out)} of {n} bytes")
        out += part
    return bytes(out)


def connect(
    host: str, port: int, deadline_s: float = 60.0, sleep: Callable[[float], None] = time.sleep
) -> socket.socket:
    """Connect to the serving task, retrying while it is not listening yet (the two tasks of a step start
    in any order) until ``deadline_s`` worth of 0.2 s waits are spent (a host name that does not resolve:
    ten tries)."""
    tries = max(1, int(deadline_s / 0.2))
    last: OSError | None = None
    unresolved = 0
    for _ in range(tries):
        try:
            sock = socket.create_connection((host, port), timeout=30.0)
        except socket.gaierror as exc:  # a name that does not resolve: a few tries, not the whole deadline
            last, unresolved = exc, unresolved + 1
            if unresolved >= 10:
                break
            sleep(0.2)
            continue
        except OSError as exc:  # refused (not listening yet), unreachable
            last = exc
            sleep(0.2)
            continue
        _tune(sock)
        return sock
    raise CommandError(["probe", "tcp", f"{host}:{port}"], None, f"cannot connect: {last}")


def measure(
    sock: socket.socket,
    nbytes: int = DEFAULT_BYTES,
    repeats: int = DEFAULT_REPEATS,
    pings: int = DEFAULT_PINGS,
    clock: Callable[[], float] = time.perf_counter,
) -> TcpResult:
    """Latency then bandwidth over the connected ``sock`` (see the module's protocol); sends ``Q`` at the
    end. One warm-up transfer of ``min(nbytes, 4 MiB)`` is not counted."""
    if not 1 <= nbytes <= MAX_BYTES or repeats < 1 or pings < 1:
        raise ValueError("nbytes 1..64 GiB, repeats >= 1, pings >= 1")
    rtts = []
    for _ in range(pings):
        t0 = clock()
        sock.sendall(b"P")
        _expect(sock, b"p")
        rtts.append(clock() - t0)
    rtt = statistics.median(rtts)
    payload = memoryview(bytes(min(nbytes, CHUNK)))
    _send(sock, min(nbytes, 4 << 20), payload)
    rates = []
    for _ in range(repeats):
        t0 = clock()
        _send(sock, nbytes, payload)
        elapsed = max(clock() - t0 - rtt, 1e-9)
        rates.append(nbytes / elapsed / 1e9)
    sock.sendall(b"Q")
    return TcpResult(statistics.median(rates), rtt / 2 * 1e6, nbytes, repeats, pings, tuple(rates))


def _send(sock: socket.socket, n: int, payload: memoryview) -> None:
    sock.sendall(b"B" + struct.pack("!Q", n))
    left = n
    while left:
        part = payload[: min(left, len(payload))]
        sock.sendall(part)
        left -= len(part)
    _expect(sock, b"b")


def _expect(sock: socket.socket, want: bytes) -> None:
    got = sock.recv(1)
    if got != want:
        raise ConnectionError(f"expected {want!r} from the serving task, got {got!r}")
