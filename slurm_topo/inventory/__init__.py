"""Load YAML inventories into the merged ``Inventory``.

An inventory is a mapping with the key ``nodes`` (a list of entries, each covering one or more nodes through a
Slurm hostlist expression) and, optionally, ``policy`` (the submit filter's defaults)::

    nodes:
      - name: gpu-ew1b-[01-06]
        region: europe-west1
        zone: europe-west1-b
        network_group: rack-3        # or labels: {gpulayer.dev/network-group: rack-3}
        switches: [row-2, tor-17]    # switch layers below the network group, top first (docs/providers.md)
        nvlink_domain: nvl-07        # NVLink scale-up domain (an NVL72 rack); docs/nvlink-domains.md
        features: [torch-2.4]
        gpus: 8
        gpu_type: h100
        source: provider             # provider | operator | self (default operator)
        slurm: {CPUs: 64, RealMemory: 512000}

Validation stops at the first problem and raises ``InventoryError`` naming ``FILE: nodes[i].key``; nothing is
rewritten silently except one documented case (a zone-shaped region with no zone, with a warning).

What Slurm would refuse is refused here, before anything is written: every ``slurm:`` value is checked against
what slurm.conf's parser accepts (``model.SLURM_INT_RANGES``, ``model.SLURM_NODE_STATES``, the Gres syntax,
one address per node); a digit run Slurm's hostlist would misread (``model.SLURM_MAX_SUFFIX``) is refused in
names and addresses; features with a generator prefix (``model.LEVEL_FEATURE_PREFIXES``) are refused on every
source.

Hostile documents are bounded: YAML aliases may expand to at most ``MAX_YAML_NODES`` nodes, a duplicate key is
an error naming both lines, a tag that does not construct (``!!int x``) is an error, a hostlist is counted
before it is expanded (``model.MAX_NODES`` in all), and every message quotes at most 40 characters of a value.

Merging (ARCHITECTURE.md, "Trust"): records for the same node at the same trust level must agree on the
location; across trust levels the most trusted record wins, lower ones only fill gaps that agree with it, and
every disagreement becomes a ``Conflict``. ``switches`` (the layers below the network group) follow the same
rule: a less trusted record fills them only under the same network group, and never replaces them.

The package, one concern per module: ``yaml_safe`` (reading YAML safely), ``entry`` (one ``nodes:`` entry),
``document`` (one inventory file), ``merge`` (inventories into one, by trust), ``slurm_nodes`` (Slurm's own
node records folded in).
"""

from __future__ import annotations

from ..core.model import natural_key, region_of_zone
from .document import Loaded, load_inventory_file, parse_inventory
from .merge import load_inventories, merge
from .slurm_nodes import with_slurm_nodes
from .yaml_safe import load_yaml

__all__ = [
    "Loaded",
    "load_inventories",
    "load_inventory_file",
    "load_yaml",
    "merge",
    "natural_key",  # re-exported: the rule lives in the model
    "parse_inventory",
    "region_of_zone",
    "with_slurm_nodes",
]
