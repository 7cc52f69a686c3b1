"""Provider records: a cloud's own instance listing -> an inventory with ``source: provider`` (the trusted
level).

``slurm-topo import gcp|aws|azure FILE`` reads a listing the admin saved (no cloud SDK or API call is made):

========= ================================================ ===================================================
provider  listing                                          location taken from
========= ================================================ ===================================================
``gcp``   ``gcloud compute instances list --format=json``   ``zone`` (a URL or a bare name; last path part) ->
                                                           zone ``europe-west1-b``, region ``europe-west1``
``aws``   ``aws ec2 describe-instances`` (JSON)             ``Placement.AvailabilityZone`` -> zone, its
                                                           region; ``Placement.GroupName`` (when not empty)
                                                           -> network group. ``terminated``/``shutting-down``
                                                           instances are left out (their names are reused by
                                                           replacements)
``azure`` ``az vm list -d`` (JSON)                          ``location`` -> region; ``zones[0]`` -> zone
                                                           ``<location>-<zone>``;
                                                           ``proximityPlacementGroup.id`` (last path part) ->
                                                           network group
========= ================================================ ===================================================

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

from . import hostlist
from .errors import InputError, InventoryError
from .inventory import parse_inventory
from .model import LABEL_RE, NODE_NAME_RE, Location, natural_key, region_of_zone

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
        yield _Instance(
            where, name if isinstance(name, str) else None, zone, region, None, str(inst.get("id", ""))
        )


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
            yield _Instance(
                where,
                _aws_instance_name(inst, aws_name),
                az,
                m["region"],
                group,
                str(inst.get("InstanceId", "")),
            )


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
        ppg = inst.get("proximityPlacementGroup")
        group = None
        if isinstance(ppg, dict) and ppg.get("id"):
            group = _label(source, f"{where}.proximityPlacementGroup.id", _last_part(ppg["id"]))
        name = inst.get("name")
        yield _Instance(
            where, name if isinstance(name, str) else None, zone, location, group, str(inst.get("vmId", ""))
        )


def import_listing(
    provider: str,
    text: str,
    *,
    source: str = "<listing>",
    name_rule: NameRule | None = None,
    aws_name: str = "tag:Name",
) -> ImportResult:
    """A cloud instance listing (JSON text) -> an inventory (``source: provider``); see the module docstring.

    ``source`` names the file in messages. Raises ``InputError``/``InventoryError`` for an unknown provider,
    text that is not JSON of the documented shape, a bad value, or two instances mapped to one node at two
    places.
    """
    rule = name_rule or NameRule()
    if provider not in PROVIDERS:
        raise InputError(f"unknown provider {provider!r} (known: {', '.join(PROVIDERS)})")
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise InventoryError(source, "", f"not valid JSON: {exc}") from None
    if provider == "gcp":
        instances = list(_gcp(doc, source))
    elif provider == "aws":
        instances = list(_aws(doc, source, aws_name))
    else:
        instances = list(_azure(doc, source))

    warnings: list[str] = []
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
        if node in placed and placed[node][0] != loc:
            other = placed[node][1]
            raise _fail(
                source,
                inst.where,
                f"node {node} is at {loc.describe()} here but at "
                f"{placed[node][0].describe()} in {other.where}",
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

    by_loc: dict[Location, list[str]] = {}
    for node, (loc, _) in placed.items():
        by_loc.setdefault(loc, []).append(node)
    entries = []
    for loc, names in sorted(
        by_loc.items(), key=lambda kv: (kv[0].describe(), natural_key(min(kv[1], key=natural_key)))
    ):
        entry: dict[str, Any] = {"name": hostlist.compress(sorted(names, key=natural_key))}
        for lvl, value in (("region", loc.region), ("zone", loc.zone), ("network_group", loc.network_group)):
            if value is not None:
                entry[lvl] = value
        entry["source"] = "provider"
        entry["found_by"] = {"location": f"{provider} instance listing"}
        entries.append(entry)
    header = f"# slurm-topo import {provider}: {len(placed)} node(s) from the provider's instance listing\n"
    body = yaml.safe_dump({"nodes": entries}, sort_keys=False, default_flow_style=False, width=1000)
    out = header + body
    parse_inventory(out, source=f"{source} (imported)")  # what we hand out must load; a bug here raises
    return ImportResult(out, tuple(warnings), len(placed))


def _some(items: Sequence[str], limit: int = 5) -> str:
    shown = ", ".join(repr(x)[:40] for x in items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")
