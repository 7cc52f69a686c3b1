"""Live link health: ``slurm-topo health`` on a node, ``slurm-topo health-sync`` on the controller side.

* :mod:`.node` — one node's pass: read, judge, write the record (``node_health``, ``write_record``);
* :mod:`.nvml` — NVML links, fabric and recovery action (through nvidia-ml-py, or from a JSON file);
* :mod:`.ib` — InfiniBand/RoCE ports from sysfs;
* :mod:`.verdict` — thresholds, verdicts (``ok``, ``degraded``, ``down``), deltas and hysteresis state;
* :mod:`.drain` — drain on a hard fault, resume only the drains made here;
* :mod:`.effects` — pure: health records -> the inventory the generator sees.

The package itself imports nothing, so the pure :mod:`.effects` loads no reader.

Guide: ``docs/health.md``.
"""
