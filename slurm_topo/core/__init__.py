"""The core model (pure): frozen value types and levels (``model``), the switch tree and feature names
(``topology``), what a job was given (``allocation``), Slurm's hostlist reading (``hostlist``) and the
one error hierarchy with its exit codes (``errors``).
"""
