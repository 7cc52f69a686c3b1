"""Slurm's configuration files: parsers (``slurmconf``), slurm.conf and its Includes read
(``slurmconf_files``), the topology file's lint (``lint``) and the controller's wiring checked against
the live Slurm (``doctor``).
"""
