"""Python's cyclic collector paused while a fleet's records are built (pure: no I/O).

Nothing the loaders and the node-state reader make is cyclic garbage, but a full collection walks every live
object each time the survivors grow by a quarter: building 100 000 nodes beside a parsed node list took 40 %
more CPU with the collector on (``benchmarks/results/loaders.md``).
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic collector off inside the block, back as it was after (nested blocks leave it off until the
    outermost ends)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
