"""Provider records: a cloud's own instance listing -> an inventory with ``source: provider`` (the trusted
level).

``slurm-topo import gcp|aws|azure FILE`` reads a listing the admin saved (no cloud SDK or API call is made):

========= ================================== ==============================================================
provider  listing                            location taken from
========= ================================== ==============================================================
``gcp``   ``gcloud compute instances list    ``zone`` (a URL or a bare name; last path part) -> zone
          --format=json``                    ``europe-west1-b``, region ``europe-west1``;
                                             ``resourceStatus.physicalHostTopology``: ``block`` -> network
                                             group, ``subblock`` then ``host`` -> ``switches`` below it,
                                             ``subblock`` also the NVLink domain on A4X (``a4x-*`` machine
                                             types: a sub-block is one NVL72 domain), ``cluster`` kept in
                                             ``found_by``
``aws``   ``aws ec2 describe-instances``     ``Placement.AvailabilityZoneId`` -> zone (the physical zone,
          (JSON)                             the same in every account; the name
                                             ``Placement.AvailabilityZone`` gives the region and is kept as
                                             ``found_by.zone_name``; without an id the name is the zone,
                                             with a warning); ``Placement.GroupName`` (when not empty) ->
                                             network group. ``terminated``/``shutting-down`` instances are
                                             left out (their names are reused)
          ``--topology FILE``: ``aws ec2     joined by ``InstanceId``: ``NetworkNodes[0]`` (the top layer)
          describe-instance-topology``       -> network group, ``NetworkNodes[1:]`` -> ``switches`` below
                                             it (2, or 3 for p6-b200/p6-b300; the last is the instance's
                                             leaf), ``CapacityBlockId`` (UltraServer) -> NVLink
                                             domain, ``ZoneId`` -> zone where describe-instances has no id
                                             (one that disagrees is an error); a null ``CapacityBlockId``,
                                             no ``NetworkNodes`` or an instance the topology lacks is a
                                             ``notes:`` line, never a guess
``azure`` ``az vm list -d`` (JSON)           ``location`` -> region; ``zones[0]`` -> zone
                                             ``<location>-<zone>``; ``proximityPlacementGroup.id`` (last
                                             path part) -> network group
          ``--zone-map FILE``: ``az account  ``availabilityZoneMappings``: the logical zone -> this
          list-locations``                   subscription's physical zone (``westeurope-az2``), the logical
                                             one kept as ``found_by.zone_name``
========= ================================== ==============================================================

Network node ids are hashed per AWS account: they are compared only within one account's topology listing
(two accounts' listings never share a group by accident, and the same switch seen from two accounts is two
groups). Layers below the top one (AWS's lower network nodes, GCE's sub-block and host) are the entry's
``switches:``: switch levels under the network group in the tree and node features (``leaf_<zone>.<id>``), not
a level of the submit filter. A node's last layers are left out while they hold that node alone in the
listing (``_trim_lone_layers``: a host with one VM groups nothing).

**Instance name -> Slurm node name** (``NameRule``): the instance name is ``name`` (gcp, azure) or, for aws,
the value chosen by ``aws_name``: ``tag:Name`` (default; any ``tag:KEY``), ``private-dns`` (the first label of
``PrivateDnsName``, e.g. ``ip-10-0-1-23``) or ``instance-id``. With no rules the node name *is* the instance
name. With rules (``--name-map REGEX=REPLACEMENT``, repeatable), the first regex that matches the *whole*
instance name gives the node name through ``re.Match.expand`` (``(.*)-vm=\\1`` strips a ``-vm`` suffix;
``gpu-vm-(\\d+)=gpu\\1`` renames); an instance no rule matches is left out, with a warning that counts them
(add ``(.*)=\\1`` last to keep the rest unchanged). ``REGEX=REPLACEMENT`` is split at its *last* ``=`` (a node
name cannot contain ``=``).

Every value is validated as a label (``[A-Za-z0-9._-]{1,63}``) or a node name; a bad one raises
``InventoryError`` as ``FILE: <json path>: reason (value)``. Two instances mapped to the same node name at
different locations are an error; an instance without a name (aws) is left out with a warning. The output
groups nodes by location (hostlist-folded names), is sorted and deterministic, and is checked by the inventory
loader before it is returned.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from ..core import hostlist
from ..core.errors import InputError, InventoryError
from ..core.model import (
    LABEL_RE,
    MAX_SWITCH_LAYERS,
    NODE_NAME_RE,
    Location,
    natural_key,
    region_of_zone,
)
from ..inventory import parse_inventory

PROVIDERS = ("gcp", "aws", "azure")
_AWS_GONE = frozenset({"terminated", "shutting-down"})
# Standard AZ us-east-1a; Local/Wavelength zones us-west-2-lax-1a, us-east-1-wl1-bos-wlz-1.
_AWS_AZ_RE = re.compile(r"^(?P<region>[a-z]{2}(?:-[a-z]+)+-\d+)(?:[a-z]|-[a-z0-9-]+)\Z")


@dataclass(frozen=True, slots=True)
class NameRule:
    """Instance name -> Slurm node name. No rules: identity. Rules: first whole match wins; no match: left
    out."""

    rules: tuple[tuple[re.Pattern[str], str], ...] = ()

    @classmethod
    def parse(cls, specs: Sequence[str]) -> NameRule:
        """Rules from ``REGEX=REPLACEMENT`` strings (``--name-map``); a bad one raises ``InputError``."""
        rules = []
        for spec in specs:
            regex, sep, repl = spec.rpartition("=")
            if not sep or not regex:
                raise InputError(f"--name-map {spec!r}: must be REGEX=REPLACEMENT")
            try:
                rules.append((re.compile(regex), repl))
            except re.error as exc:
                raise InputError(f"--name-map {spec!r}: bad regular expression: {exc}") from None
        return cls(tuple(rules))

    @classmethod
    def strip_suffix(cls, suffix: str) -> NameRule:
        """Names ending in ``suffix`` lose it; other names are kept unchanged."""
        return cls(((re.compile(f"(.*){re.escape(suffix)}"), r"\1"), (re.compile("(.*)"), r"\1")))

    def map(self, name: str) -> str | None:
        if not self.rules:
            return name
        for regex, repl in self.rules:
            m = regex.fullmatch(name)
            if m is not None:
                try:
                    return m.expand(repl)
                except (re.error, IndexError) as exc:
                    raise InputError(f"--name-map {regex.pattern}={repl}: bad replacement: {exc}") from None
        return None


@dataclass(frozen=True, slots=True)
class ImportResult:
    """The inventory text (``source: provider``), the warning lines (no ``warning:`` prefix), the node
    count."""

    text: str
    warnings: tuple[str, ...] = ()
    nodes: int = 0


@dataclass(slots=True)
class _Instance:
    where: str  # JSON path, for messages
    name: str | None
    zone: str | None
    region: str | None
    group: str | None = None
    ident: str = ""
    extra: dict[str, str] = field(default_factory=dict)
    """``found_by`` keys beside ``location``: the zone's name where the zone is keyed by its id, the GCE
    cluster."""
    domain: str | None = None
    """The NVLink domain the provider names (an A4X sub-block, an UltraServer's capacity block)."""
    notes: tuple[str, ...] = ()
    """What the provider's listings left unknown (a null capacity block, an instance the topology listing
    lacks): written as the entry's ``notes``, never guessed."""
    switches: tuple[str, ...] = ()
    """The provider's layers below the network group, top first (GCE sub-block and host, AWS's lower
    network nodes): the entry's ``switches``."""


def _fail(source: str, where: str, reason: str, value: object) -> InventoryError:
    return InventoryError(source, where, reason, value, has_value=True)


def _label(source: str, where: str, value: object) -> str:
    if not isinstance(value, str) or not LABEL_RE.fullmatch(value):
        raise _fail(source, where, "must be 1-63 characters from [A-Za-z0-9._-]", value)
    return value


def _last_part(value: object) -> object:
    return value.rstrip("/").rsplit("/", 1)[-1] if isinstance(value, str) else value


def _gcp(doc: Any, source: str) -> Iterator[_Instance]:
    if not isinstance(doc, list):
        raise _fail(source, "", "must be a JSON list (gcloud compute instances list --format=json)", doc)
    for i, inst in enumerate(doc):
        where = f"[{i}]"
        if not isinstance(inst, dict):
            raise _fail(source, where, "must be an object", inst)
        zone = _label(source, f"{where}.zone", _last_part(inst.get("zone")))
        region = region_of_zone(zone) or (zone.rsplit("-", 1)[0] if "-" in zone else None)
        if region is None:
            raise _fail(source, f"{where}.zone", "does not name a region", zone)
        name = inst.get("name")
        found = _Instance(
            where, name if isinstance(name, str) else None, zone, region, None, str(inst.get("id", ""))
        )
        _gcp_physical(inst, found, source)
        yield found


GCE_NVL_MACHINES = ("a4x-",)
"""Machine types whose sub-block is an NVLink domain (A4X: GB200 NVL72, a sub-block of 18 VMs; Compute
Engine, "A4X machine series" / "View VM topology")."""


def _gcp_physical(inst: dict[str, Any], found: _Instance, source: str) -> None:
    """``resourceStatus.physicalHostTopology {cluster, block, subblock, host}`` (Compute Engine API v1,
    ``ResourceStatusPhysicalHostTopology``): the block is the network group, the sub-block and the host the
    switches below it ("instances in the same sub-block experience lower network latency than instances in
    the same block"), an A4X sub-block also the NVLink domain, the cluster a ``found_by`` note; absent (a VM
    without a placement on such hardware): nothing. A sub-block or host without a block hangs nowhere: a
    note."""
    status = inst.get("resourceStatus")
    topo = status.get("physicalHostTopology") if isinstance(status, dict) else None
    if topo is None:
        return
    where = f"{found.where}.resourceStatus.physicalHostTopology"
    if not isinstance(topo, dict):
        raise _fail(source, where, "must be an object", topo)
    if topo.get("block") is not None:
        found.group = _label(source, f"{where}.block", topo["block"])
    if topo.get("cluster") is not None:
        found.extra["cluster"] = _label(source, f"{where}.cluster", topo["cluster"])
    below = tuple(
        _label(source, f"{where}.{key}", topo[key])
        for key in ("subblock", "host")
        if topo.get(key) is not None
    )
    if below and found.group is None:
        found.notes += ("physicalHostTopology has a sub-block or host but no block: no switches",)
    elif below:
        found.switches = _switch_path(source, where, below)
    machine = _last_part(inst.get("machineType"))
    if topo.get("subblock") is not None and isinstance(machine, str) and machine.startswith(GCE_NVL_MACHINES):
        found.domain = _label(source, f"{where}.subblock", topo["subblock"])


def _switch_path(source: str, where: str, labels: tuple[str, ...]) -> tuple[str, ...]:
    """The layers below the network group as the inventory takes them: at most ``MAX_SWITCH_LAYERS``, none
    twice (a path, top first)."""
    if len(labels) > MAX_SWITCH_LAYERS:
        raise _fail(source, where, f"more than {MAX_SWITCH_LAYERS} layers below the top one", list(labels))
    if len(set(labels)) != len(labels):
        raise _fail(source, where, "names one layer twice", list(labels))
    return labels


def _aws(doc: Any, source: str, aws_name: str) -> Iterator[_Instance]:
    if not isinstance(doc, dict) or not isinstance(doc.get("Reservations"), list):
        raise _fail(
            source, "", "must be an object with a Reservations list (aws ec2 describe-instances)", doc
        )
    for r, res in enumerate(doc["Reservations"]):
        instances = res.get("Instances") if isinstance(res, dict) else None
        if not isinstance(instances, list):
            raise _fail(source, f"Reservations[{r}].Instances", "must be a list", instances)
        for i, inst in enumerate(instances):
            where = f"Reservations[{r}].Instances[{i}]"
            if not isinstance(inst, dict):
                raise _fail(source, where, "must be an object", inst)
            state = inst.get("State")
            if isinstance(state, dict) and state.get("Name") in _AWS_GONE:
                continue
            placement = inst.get("Placement")
            if not isinstance(placement, dict):
                raise _fail(source, f"{where}.Placement", "must be an object", placement)
            az = _label(source, f"{where}.Placement.AvailabilityZone", placement.get("AvailabilityZone"))
            m = _AWS_AZ_RE.fullmatch(az)
            if m is None:
                raise _fail(
                    source, f"{where}.Placement.AvailabilityZone", "is not an availability zone name", az
                )
            group = placement.get("GroupName") or None
            if group is not None:
                group = _label(source, f"{where}.Placement.GroupName", group)
            zone, extra = az, {}
            if placement.get("AvailabilityZoneId") is not None:  # the physical zone: same in every account
                zone = _label(
                    source, f"{where}.Placement.AvailabilityZoneId", placement["AvailabilityZoneId"]
                )
                extra["zone_name"] = az
            yield _Instance(
                where,
                _aws_instance_name(inst, aws_name),
                zone,
                m["region"],
                group,
                str(inst.get("InstanceId", "")),
                extra,
            )


@dataclass(frozen=True, slots=True)
class _AwsTopology:
    """One instance of ``aws ec2 describe-instance-topology`` (EC2 API ``InstanceTopology``)."""

    where: str
    network_nodes: tuple[str, ...]
    zone_id: str | None
    has_block: bool
    """``CapacityBlockId`` is in the record (UltraServer instances only), null or not."""
    capacity_block: str | None


def _aws_topology(doc: Any, source: str) -> dict[str, _AwsTopology]:
    """Instance id -> its topology record; a record without an id, a repeated id or a bad value raises."""
    if not isinstance(doc, dict) or not isinstance(doc.get("Instances"), list):
        raise _fail(
            source, "", "must be an object with an Instances list (aws ec2 describe-instance-topology)", doc
        )
    out: dict[str, _AwsTopology] = {}
    for i, rec in enumerate(doc["Instances"]):
        where = f"Instances[{i}]"
        if not isinstance(rec, dict):
            raise _fail(source, where, "must be an object", rec)
        ident = _label(source, f"{where}.InstanceId", rec.get("InstanceId"))
        if ident in out:
            raise _fail(source, f"{where}.InstanceId", f"is listed twice (also {out[ident].where})", ident)
        nodes = rec.get("NetworkNodes") or []  # null or empty: type not supported, or not running
        if not isinstance(nodes, list):
            raise _fail(source, f"{where}.NetworkNodes", "must be a list", nodes)
        zone_id = rec.get("ZoneId")
        block = rec.get("CapacityBlockId")
        path = tuple(_label(source, f"{where}.NetworkNodes[{j}]", n) for j, n in enumerate(nodes))
        if path:
            _switch_path(source, f"{where}.NetworkNodes", path[1:])
            if path[0] in path[1:]:
                raise _fail(source, f"{where}.NetworkNodes", "names one layer twice", nodes)
        out[ident] = _AwsTopology(
            where,
            path,
            _label(source, f"{where}.ZoneId", zone_id) if zone_id is not None else None,
            "CapacityBlockId" in rec,
            _label(source, f"{where}.CapacityBlockId", block) if block is not None else None,
        )
    return out


def _join_aws_topology(
    instances: list[_Instance], topology: dict[str, _AwsTopology], source: str
) -> list[str]:
    """Each instance's network nodes (the top layer is its network group), its capacity block (its NVLink
    domain) and its zone id, joined by instance id; the warnings. What the topology listing does not say is a
    note on the node; a zone id that disagrees with describe-instances raises."""
    warnings: list[str] = []
    for inst in instances:
        rec = topology.get(inst.ident)
        if rec is None:
            inst.notes += ("not in the describe-instance-topology listing: network nodes unknown",)
            continue
        if rec.zone_id is not None and rec.zone_id != inst.zone:
            if "zone_name" in inst.extra:  # both are zone ids, and they disagree
                raise _fail(
                    source,
                    f"{rec.where}.ZoneId",
                    f"{inst.ident} is in {inst.zone} in describe-instances",
                    rec.zone_id,
                )
            inst.extra["zone_name"], inst.zone = inst.zone or "", rec.zone_id
        if rec.network_nodes:
            inst.group = rec.network_nodes[0]
            inst.switches = rec.network_nodes[1:]
        else:
            inst.notes += ("no NetworkNodes (instance type not supported, or not running)",)
        if rec.capacity_block is not None:
            inst.domain = rec.capacity_block
        elif rec.has_block:
            inst.notes += ("CapacityBlockId is null (not yet known right after launch): no NVLink domain",)
    known = {inst.ident for inst in instances}
    extra = sorted(set(topology) - known)
    if extra:
        warnings.append(
            f"{source}: {len(extra)} instance(s) of the topology listing are not in describe-instances, "
            f"left out: {_some(extra)}"
        )
    return warnings


def _aws_instance_name(inst: dict[str, Any], aws_name: str) -> str | None:
    if aws_name == "instance-id":
        value = inst.get("InstanceId")
    elif aws_name == "private-dns":
        dns = inst.get("PrivateDnsName")
        value = dns.split(".", 1)[0] if isinstance(dns, str) else None
    elif aws_name.startswith("tag:"):
        key = aws_name[4:]
        tags = inst.get("Tags")
        tags = tags if isinstance(tags, list) else []  # no tag list: an instance without a name (left out)
        value = next((t.get("Value") for t in tags if isinstance(t, dict) and t.get("Key") == key), None)
    else:
        raise InputError(f"aws instance name: {aws_name!r} is not tag:KEY, private-dns or instance-id")
    return value if isinstance(value, str) and value else None


def azure_zone_map(doc: Any, source: str) -> dict[tuple[str, str], str]:
    """``az account list-locations`` (Azure Resource Manager Subscriptions API, ``Location`` with
    ``availabilityZoneMappings[] {logicalZone, physicalZone}``) -> (location name, logical zone) -> physical
    zone."""
    if not isinstance(doc, list):
        raise _fail(source, "", "must be a JSON list (az account list-locations)", doc)
    out: dict[tuple[str, str], str] = {}
    for i, loc in enumerate(doc):
        where = f"[{i}]"
        if not isinstance(loc, dict):
            raise _fail(source, where, "must be an object", loc)
        mappings = loc.get("availabilityZoneMappings") or []
        if not mappings:
            continue
        name = _label(source, f"{where}.name", loc.get("name"))
        if not isinstance(mappings, list):
            raise _fail(source, f"{where}.availabilityZoneMappings", "must be a list", mappings)
        for j, m in enumerate(mappings):
            at = f"{where}.availabilityZoneMappings[{j}]"
            if not isinstance(m, dict):
                raise _fail(source, at, "must be an object", m)
            logical = _label(source, f"{at}.logicalZone", m.get("logicalZone"))
            out[(name, logical)] = _label(source, f"{at}.physicalZone", m.get("physicalZone"))
    return out


def _azure(doc: Any, source: str) -> Iterator[_Instance]:
    if not isinstance(doc, list):
        raise _fail(source, "", "must be a JSON list (az vm list -d)", doc)
    for i, inst in enumerate(doc):
        where = f"[{i}]"
        if not isinstance(inst, dict):
            raise _fail(source, where, "must be an object", inst)
        location = _label(source, f"{where}.location", inst.get("location"))
        zones = inst.get("zones") or []
        if not isinstance(zones, list):
            raise _fail(source, f"{where}.zones", "must be a list", zones)
        zone = _label(source, f"{where}.zones[0]", f"{location}-{zones[0]}") if zones else None
        logical = {"logical_zone": str(zones[0])} if zones else {}
        ppg = inst.get("proximityPlacementGroup")
        group = None
        if isinstance(ppg, dict) and ppg.get("id"):
            group = _label(source, f"{where}.proximityPlacementGroup.id", _last_part(ppg["id"]))
        name = inst.get("name")
        yield _Instance(
            where,
            name if isinstance(name, str) else None,
            zone,
            location,
            group,
            str(inst.get("vmId", "")),
            logical,
        )


def _apply_zone_map(instances: list[_Instance], zones: dict[tuple[str, str], str], source: str) -> list[str]:
    """Azure: each zonal VM's logical zone -> its subscription's physical zone (the zone, the logical one kept
    as ``zone_name``); a VM whose location the map lacks keeps its logical zone, with a warning."""
    unmapped: list[str] = []
    for inst in instances:
        logical = inst.extra.pop("logical_zone", None)
        if logical is None or inst.region is None:
            continue
        physical = zones.get((inst.region, logical))
        if physical is None:
            unmapped.append(inst.name or inst.where)
            continue
        inst.extra["zone_name"], inst.zone = inst.zone or "", physical
    if not unmapped:
        return []
    return [
        f"{source}: {len(unmapped)} VM(s) in a location or zone the zone map lacks keep their logical zone "
        f"(subscriptions may map it to other physical zones): {_some(unmapped)}"
    ]


def _json(text: str, source: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise InventoryError(source, "", f"not valid JSON: {exc}") from None


@dataclass(frozen=True, slots=True)
class Companion:
    """A second listing read beside the instance listing: its text and its name in messages
    (``--topology FILE`` for aws, ``--zone-map FILE`` for azure)."""

    text: str
    source: str


def import_listing(
    provider: str,
    text: str,
    *,
    source: str = "<listing>",
    name_rule: NameRule | None = None,
    aws_name: str = "tag:Name",
    topology: Companion | None = None,
    zone_map: Companion | None = None,
) -> ImportResult:
    """A cloud instance listing (JSON text) -> an inventory (``source: provider``); see the module docstring.

    ``source`` names the file in messages; ``topology`` is aws's ``describe-instance-topology`` listing,
    ``zone_map`` azure's ``az account list-locations``. Raises ``InputError``/``InventoryError`` for an
    unknown provider, text that is not JSON of the documented shape, a bad value, a companion listing for
    another provider, or two instances mapped to one node at two places.
    """
    rule = name_rule or NameRule()
    if provider not in PROVIDERS:
        raise InputError(f"unknown provider {provider!r} (known: {', '.join(PROVIDERS)})")
    if topology is not None and provider != "aws":
        raise InputError("a topology listing (describe-instance-topology) is read for aws only")
    if zone_map is not None and provider != "azure":
        raise InputError("a zone map (az account list-locations) is read for azure only")
    doc = _json(text, source)
    warnings: list[str] = []
    if provider == "gcp":
        instances = list(_gcp(doc, source))
    elif provider == "aws":
        instances = list(_aws(doc, source, aws_name))
        if topology is not None:
            topo = _aws_topology(_json(topology.text, topology.source), topology.source)
            warnings += _join_aws_topology(instances, topo, topology.source)
    else:
        instances = list(_azure(doc, source))
        if zone_map is not None:
            zones = azure_zone_map(_json(zone_map.text, zone_map.source), zone_map.source)
            warnings += _apply_zone_map(instances, zones, zone_map.source)
    placed = _place(instances, rule, source, aws_name, warnings)
    _trim_lone_layers(placed)
    by_name = [inst.ident or node for node, (_, inst) in placed.items() if "zone_name" not in inst.extra]
    if provider == "aws" and by_name:
        warnings.append(
            f"{source}: {len(by_name)} instance(s) without Placement.AvailabilityZoneId: their zone is the "
            f"AZ name, which may be another physical zone in another account: {_some(sorted(by_name))}"
        )
    return _result(provider, placed, source, warnings)


def _place(
    instances: list[_Instance], rule: NameRule, source: str, aws_name: str, warnings: list[str]
) -> dict[str, tuple[Location, _Instance]]:
    """Node name -> (location, instance); instances without a name or a rule left out (a warning each)."""
    unnamed: list[str] = []
    unmatched: list[str] = []
    placed: dict[str, tuple[Location, _Instance]] = {}
    for inst in instances:
        if inst.name is None:
            unnamed.append(inst.ident or inst.where)
            continue
        node = rule.map(inst.name)
        if node is None:
            unmatched.append(inst.name)
            continue
        if not NODE_NAME_RE.fullmatch(node):
            raise _fail(
                source,
                inst.where,
                f"instance {inst.name!r} maps to an invalid node name (1-64 characters from [A-Za-z0-9._-])",
                node,
            )
        loc = Location(inst.region, inst.zone, inst.group)
        if node in placed and (placed[node][0], placed[node][1].domain, placed[node][1].switches) != (
            loc,
            inst.domain,
            inst.switches,
        ):
            other = placed[node][1]
            raise _fail(
                source,
                inst.where,
                f"node {node} is at {_describe(loc, inst.domain, inst.switches)} here but at "
                f"{_describe(placed[node][0], other.domain, other.switches)} in {other.where}",
                inst.name,
            )
        placed[node] = (loc, inst)
    if unnamed:
        what = "a Name tag" if aws_name == "tag:Name" else f"an instance name ({aws_name})"
        warnings.append(f"{source}: {len(unnamed)} instance(s) without {what} left out: {_some(unnamed)}")
    if unmatched:
        warnings.append(
            f"{source}: {len(unmatched)} instance(s) matched no --name-map rule, left out: {_some(unmatched)}"
        )
    return placed


def _trim_lone_layers(placed: dict[str, tuple[Location, _Instance]]) -> None:
    """Drop each node's last layers while the switch holds that node alone in the listing (a host with one VM,
    a network leaf with one instance): a one-node switch groups nothing, and the tree without it places
    every job alike, with one switch and one inventory entry fewer per node (GCE A3/A4 VMs are one per host:
    ``benchmarks/results/switch_layers.md``). A layer that holds two nodes stays, and so do the layers
    above it."""
    count: dict[tuple[Location, tuple[str, ...]], int] = {}
    for loc, inst in placed.values():
        for depth in range(1, len(inst.switches) + 1):
            key = (loc, inst.switches[:depth])
            count[key] = count.get(key, 0) + 1
    for loc, inst in placed.values():
        path = inst.switches
        while path and count[(loc, path)] == 1:
            path = path[:-1]
        inst.switches = path


def _describe(loc: Location, domain: str | None, switches: tuple[str, ...] = ()) -> str:
    return (
        loc.describe()
        + (f", switches={'/'.join(switches)}" if switches else "")
        + (f", nvlink_domain={domain}" if domain is not None else "")
    )


def _result(
    provider: str, placed: dict[str, tuple[Location, _Instance]], source: str, warnings: list[str]
) -> ImportResult:
    """The inventory text: one entry per location, switches, NVLink domain, ``found_by`` and notes
    (hostlist-folded, sorted), checked by the inventory loader."""
    groups: dict[_EntryKey, list[str]] = {}
    for node, (loc, inst) in placed.items():
        key = (loc, inst.switches, inst.domain, tuple(sorted(inst.extra.items())), inst.notes)
        groups.setdefault(key, []).append(node)
    entries = []
    for (loc, switches, domain, extra, notes), names in sorted(
        groups.items(),
        key=lambda kv: (
            _describe(kv[0][0], kv[0][2], kv[0][1]),
            natural_key(min(kv[1], key=natural_key)),
            kv[0][3:],
        ),
    ):
        entry: dict[str, Any] = {"name": hostlist.compress(sorted(names, key=natural_key))}
        for lvl, value in (("region", loc.region), ("zone", loc.zone), ("network_group", loc.network_group)):
            if value is not None:
                entry[lvl] = value
        if switches:
            entry["switches"] = list(switches)
        if domain is not None:
            entry["nvlink_domain"] = domain
        entry["source"] = "provider"
        entry["found_by"] = {"location": f"{provider} instance listing", **dict(extra)}
        if notes:
            entry["notes"] = list(notes)
        entries.append(entry)
    header = f"# slurm-topo import {provider}: {len(placed)} node(s) from the provider's instance listing\n"
    doc: dict[str, Any] = {"nodes": entries}
    if provider in LINK_PROFILES:  # how the provider's VMs talk (cost/links.py PROFILES; docs/cost.md)
        doc["links"] = {"profile": LINK_PROFILES[provider]}
    body = yaml.safe_dump(doc, sort_keys=False, default_flow_style=False, width=1000)
    out = header + body
    parse_inventory(out, source=f"{source} (imported)")  # what we hand out must load; a bug here raises
    return ImportResult(out, tuple(warnings), len(placed))


_EntryKey = tuple[Location, tuple[str, ...], str | None, tuple[tuple[str, str], ...], tuple[str, ...]]
"""One entry of an import: location, switches, NVLink domain, ``found_by`` beside the location, notes."""

LINK_PROFILES = {"gcp": "gcp", "aws": "aws", "azure": "azure"}
"""The ``links: {profile: …}`` an import writes (``slurm_topo.cost.links.PROFILES``, docs/cost.md): Google
Cloud VMs over the VPC (TCP, egress-capped; ``gcp``), EC2 GPU instances with EFA inside an AZ and TCP over
ENA across AZs (``aws``), ND H100 v5 VMs with InfiniBand inside a scale set and the VM's Ethernet outside it
(``azure``)."""


def _some(items: Sequence[str], limit: int = 5) -> str:
    shown = ", ".join(repr(x)[:40] for x in items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")
