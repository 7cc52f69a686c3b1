"""Plumbing: the one place that starts processes (``runner``), atomic writes (``output``), the end of
every entry point (``entry``) and its message style (``text``), the generator version (``version``),
the loaders' collector pause (``collector``) and gpulayer-srun's per-task shim (``srun_shim``: sets
the task's GPUs from the plan and execs the command; it decides nothing).
"""
