"""Node-side discovery: where am I? Flags, environment, and the metadata of the one cloud DMI says we are on.

``slurm-topo discover`` runs on a node and prints that node's record (``source: self``). It never contacts
slurmctld and never runs a command. Algorithm:

1. **Name**: ``node_name`` (``--node-name``), else ``$SLURMD_NODENAME``, else the short host name. It must
   be a valid Slurm node name (1-64 characters from ``[A-Za-z0-9._-]``).
2. **Explicit values**: per level, the flag (``--region/--zone/--network-group``) wins over the environment
   (``GPULAYER_REGION``, ``GPULAYER_ZONE``, ``GPULAYER_NETWORK_GROUP``). A bad explicit value raises
   ``InputError``.
3. **Cloud**, only when a level is still missing, and only on the cloud DMI names (at most one is asked):

   - **GCE** when DMI ``product_name`` is ``Google Compute Engine``: ``GET instance/zone`` with
     ``Metadata-Flavor: Google`` (``projects/N/zones/Z``: zone Z, region Z less its last ``-x``);
   - **AWS** when DMI ``sys_vendor`` is ``Amazon EC2`` or ``/sys/hypervisor/uuid`` starts with ``ec2``:
     IMDSv2, ``PUT /latest/api/token`` first, then ``placement/{region,availability-zone,group-name}`` with
     the token (the placement group, when there is one, is the network-group candidate);
   - **Azure** when DMI ``chassis_asset_tag`` is ``7783-7084-3265-9085-8269-3286-77``:
     ``GET /instance?api-version=2021-02-01`` with ``Metadata: true``; ``compute.location`` is the region and
     ``compute.zone`` the zone, recorded as ``<location>-<zone>``.

   Anything else (including a missing DMI folder, normal in containers and some VMs) sends **no** request and
   adds a note. Each provider has one total time budget (``budget_s``, 1 s, read on ``clock``:
   ``time.monotonic`` unless a test injects one): every socket operation gets the time left as its timeout
   and the body is read against the same deadline, so a hanging or trickling server costs at most about the
   budget. No answer in time, a refused connection or an HTTP error status is not an
   error: the record is returned without the cloud's values and with a note (the node may still be placed by a
   trusted record). An answer that *is* given but is garbage (not UTF-8, not the documented shape, a value
   that is not a valid label, a zone outside its region) raises ``MetadataError`` (exit 2) and no record is
   made: a value from the network never reaches a file unvalidated, and notes never quote it.
4. **NVLink domain** (``docs/nvlink-domains.md``): ``nvlink_domain`` (the argument), else
   ``$GPULAYER_NVLINK_DOMAIN``, else NVML (``slurm_topo.gpu.fabric``: ``<cluster UUID>.<clique>`` from a
   COMPLETED fabric, else the rack chassis serial), asked only where ``pynvml`` is installed. No domain is a
   note, never an error.
5. **Combination**: explicit values win per level; a metadata value that disagrees with an explicit one is
   dropped with a note. A missing region is derived from a zone-shaped zone (``europe-west1-b`` ->
   ``europe-west1``). A network group without any region is dropped with a note (the inventory would refuse
   it).

Requests go through ``http.client`` rather than ``urllib.request`` on purpose: urllib honours ``http_proxy``
from the environment and follows redirects, and a metadata request must do neither.

Trust: a record made here is always ``source: self``. ``slurm_topo.sources.records`` reads such records back
and forces ``self`` whatever the file says; a self value fills a gap in a trusted record but never overrides
it (ARCHITECTURE.md, "Trust").
"""

from __future__ import annotations

import http.client
import json
import os
import re
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from ..core.errors import InputError, show_value
from ..core.model import (
    LABEL_RE,
    LEVELS,
    NODE_NAME_RE,
    region_of_gce_zone,
    region_of_zone,
    zone_in_region,
)

GCE_URL = "http://169.254.169.254/computeMetadata/v1"
AWS_URL = "http://169.254.169.254"
AZURE_URL = "http://169.254.169.254/metadata"
DMI_ROOT = Path("/sys/class/dmi/id")
HYPERVISOR_UUID = Path("/sys/hypervisor/uuid")
AZURE_ASSET_TAG = "7783-7084-3265-9085-8269-3286-77"
ENV_LEVELS = {"region": "GPULAYER_REGION", "zone": "GPULAYER_ZONE", "network_group": "GPULAYER_NETWORK_GROUP"}
ENV_NVLINK_DOMAIN = "GPULAYER_NVLINK_DOMAIN"

_MAX_BODY = 64 * 1024
_GCE_ZONE_RE = re.compile(r"^projects/[^/\s]{1,128}/zones/(?P<zone>[^/\s]{1,128})\Z")
_AWS_TOKEN_RE = re.compile(r"^[A-Za-z0-9_=+/.-]{1,1024}\Z")
_AZURE_ZONE_RE = re.compile(r"^[A-Za-z0-9]{1,8}\Z")
_SOURCE_SELF = "self"


class MetadataError(InputError):
    """A metadata service answered, but with something that is not a valid location: no record is made."""

    def __init__(
        self, provider: str, url: str, reason: str, value: object = None, *, has_value: bool = False
    ):
        self.provider = provider
        self.url = url
        self.reason = reason
        tail = f" ({show_value(value)})" if has_value else ""
        super().__init__(f"{provider} metadata {url}: {reason}{tail}; no record made")


class _NoAnswer(Exception):
    """The service did not answer usefully (timeout, refused, HTTP error): a note, not an error."""


@dataclass(frozen=True, slots=True)
class NodeRecord:
    """What a node says about itself. ``source`` is always ``self``; ``found_by`` maps a field to its
    origin."""

    name: str
    region: str | None = None
    zone: str | None = None
    network_group: str | None = None
    found_by: tuple[tuple[str, str], ...] = ()
    notes: tuple[str, ...] = ()
    source: str = field(default=_SOURCE_SELF, init=False)
    nvlink_domain: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """The ``--json`` object, keys in the documented order (``nvlink_domain`` only when known)."""
        out: dict[str, Any] = {
            "name": self.name,
            "region": self.region,
            "zone": self.zone,
            "network_group": self.network_group,
        }
        if self.nvlink_domain is not None:
            out["nvlink_domain"] = self.nvlink_domain
        out.update(source=self.source, found_by=dict(self.found_by), notes=list(self.notes))
        return out


def record_json(rec: NodeRecord) -> str:
    """Exactly one JSON object on one line, ending in a newline (print with ``nl=False``)."""
    return json.dumps(rec.as_dict(), ensure_ascii=True) + "\n"


def record_yaml(rec: NodeRecord) -> str:
    """A one-entry inventory (``nodes: [...]``) that ``--inventory`` and ``--records`` accept; ends in a
    newline."""
    entry: dict[str, Any] = {"name": rec.name}
    for lvl in LEVELS:
        if getattr(rec, lvl) is not None:
            entry[lvl] = getattr(rec, lvl)
    if rec.nvlink_domain is not None:
        entry["nvlink_domain"] = rec.nvlink_domain
    entry["source"] = rec.source
    if rec.found_by:
        entry["found_by"] = dict(rec.found_by)
    if rec.notes:
        entry["notes"] = list(rec.notes)
    body = yaml.safe_dump(
        {"nodes": [entry]}, sort_keys=False, default_flow_style=False, allow_unicode=False, width=1000
    )
    return f"# slurm-topo discover: node record of {rec.name} (source: self)\n{body}"


# -------------------------------------------------------------------------------------------------- detection


def _read_dmi(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:  # missing folder or file, unreadable: normal outside clouds
        return None


def detect_cloud(
    dmi_root: Path = DMI_ROOT, hypervisor_uuid: Path = HYPERVISOR_UUID
) -> tuple[str | None, str]:
    """Which cloud DMI names (``gce``, ``aws``, ``azure`` or None), and why, from local files only."""
    product = _read_dmi(dmi_root / "product_name")
    if product == "Google Compute Engine":
        return "gce", "dmi product_name"
    vendor = _read_dmi(dmi_root / "sys_vendor")
    if vendor == "Amazon EC2":
        return "aws", "dmi sys_vendor"
    uuid = _read_dmi(hypervisor_uuid)
    if uuid is not None and uuid.lower().startswith(
        "ec2"
    ):  # Xen-based EC2 instances; AWS documents ec2 and EC2
        return "aws", "hypervisor uuid"
    if _read_dmi(dmi_root / "chassis_asset_tag") == AZURE_ASSET_TAG:
        return "azure", "dmi chassis_asset_tag"
    if product is None and vendor is None and not dmi_root.is_dir():
        return None, f"no DMI information ({dmi_root} missing)"
    return None, "DMI names no supported cloud"


# ------------------------------------------------------------------------------------------------------- HTTP


def _http(
    method: str, url: str, headers: Mapping[str, str], deadline: float, clock: Callable[[], float]
) -> tuple[int, bytes]:
    """One request against an absolute deadline (on ``clock``); raises ``_NoAnswer`` when there is no timely
    answer."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InputError(f"metadata URL {show_value(url)}: must be http://HOST[:PORT]/PATH")
    remaining = deadline - clock()
    if remaining <= 0:
        raise _NoAnswer("no answer within the time budget")
    cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    conn = cls(parts.hostname, parts.port, timeout=remaining)
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    try:
        conn.request(method, path, headers=dict(headers))
        _retime(conn, deadline, clock)
        resp = conn.getresponse()
        body = b""
        while True:
            _retime(conn, deadline, clock)
            chunk = resp.read1(4096)
            if not chunk:
                break
            body += chunk
            if len(body) > _MAX_BODY:
                return resp.status, body  # the caller refuses it as garbage
        return resp.status, body
    except TimeoutError:
        raise _NoAnswer("no answer within the time budget") from None
    except (OSError, http.client.HTTPException) as exc:
        raise _NoAnswer(f"no answer ({type(exc).__name__})") from None
    finally:
        conn.close()


def _retime(conn: http.client.HTTPConnection, deadline: float, clock: Callable[[], float]) -> None:
    remaining = deadline - clock()
    if remaining <= 0:
        raise TimeoutError
    if conn.sock is not None:
        conn.sock.settimeout(remaining)


class _Client:
    """Requests of one provider, sharing its deadline."""

    def __init__(self, provider: str, deadline: float, clock: Callable[[], float]):
        self.provider = provider
        self.deadline = deadline
        self.clock = clock

    def text(
        self, method: str, url: str, headers: Mapping[str, str], *, missing_ok: bool = False
    ) -> str | None:
        status, body = _http(method, url, headers, self.deadline, self.clock)
        if status == 404 and missing_ok:
            return None
        if status != 200:
            raise _NoAnswer(f"{method} {url} answered HTTP {status}")
        if len(body) > _MAX_BODY:
            raise MetadataError(self.provider, url, f"answer longer than {_MAX_BODY} bytes")
        try:
            return body.decode("utf-8")
        except UnicodeDecodeError:
            raise MetadataError(
                self.provider, url, "answer is not UTF-8 text", body[:40], has_value=True
            ) from None

    def label(self, url: str, what: str, value: object) -> str:
        if not isinstance(value, str) or not LABEL_RE.fullmatch(value):
            raise MetadataError(
                self.provider,
                url,
                f"{what} is not 1-63 characters from [A-Za-z0-9._-]",
                value,
                has_value=True,
            )
        return value


# -------------------------------------------------------------------------------------------------- providers


Found = dict[str, str]  # level -> value


def _gce(base: str, client: _Client) -> Found:
    url = f"{base.rstrip('/')}/instance/zone"
    text = client.text("GET", url, {"Metadata-Flavor": "Google"})
    assert text is not None
    m = _GCE_ZONE_RE.fullmatch(text.strip())
    if m is None:
        raise MetadataError("gce", url, "not of the form projects/N/zones/ZONE", text, has_value=True)
    zone = client.label(url, "zone", m["zone"])
    region = region_of_gce_zone(zone)
    if region is None or not LABEL_RE.fullmatch(region):
        raise MetadataError("gce", url, "zone does not name a region", zone, has_value=True)
    return {"region": region, "zone": zone}


def _aws(base: str, client: _Client) -> Found:
    root = base.rstrip("/")
    token_url = f"{root}/latest/api/token"
    token = client.text("PUT", token_url, {"X-aws-ec2-metadata-token-ttl-seconds": "60"})
    assert token is not None
    token = token.strip()
    if not _AWS_TOKEN_RE.fullmatch(token):
        raise MetadataError("aws", token_url, "token is not a plain token string", token, has_value=True)
    headers = {"X-aws-ec2-metadata-token": token}
    meta = f"{root}/latest/meta-data/placement"
    region_text = client.text("GET", f"{meta}/region", headers)
    az_text = client.text("GET", f"{meta}/availability-zone", headers)
    assert region_text is not None and az_text is not None
    region = client.label(f"{meta}/region", "region", region_text.strip())
    zone = client.label(f"{meta}/availability-zone", "availability zone", az_text.strip())
    if region_of_zone(region) is not None:
        raise MetadataError("aws", f"{meta}/region", "region is spelled like a zone", region, has_value=True)
    if not zone.startswith(region) or (region_of_zone(zone) not in (None, region)):
        raise MetadataError(
            "aws", f"{meta}/availability-zone", f"zone is not in region {region}", zone, has_value=True
        )
    found = {"region": region, "zone": zone}
    group = client.text("GET", f"{meta}/group-name", headers, missing_ok=True)
    if group is not None and group.strip():
        if LABEL_RE.fullmatch(group.strip()):
            found["network_group"] = group.strip()
        else:  # AWS allows 255 printable characters; unusable as a label, and never copied into a note
            found["_note"] = (
                f"aws placement group name ({len(group.strip())} characters) is not a valid "
                "label; not used as network group"
            )
    return found


def _azure(base: str, client: _Client) -> Found:
    url = f"{base.rstrip('/')}/instance?api-version=2021-02-01"
    text = client.text("GET", url, {"Metadata": "true"})
    assert text is not None
    try:
        doc = json.loads(text)
    except ValueError:
        raise MetadataError("azure", url, "answer is not JSON", text, has_value=True) from None
    compute = doc.get("compute") if isinstance(doc, dict) else None
    if not isinstance(compute, dict):
        raise MetadataError("azure", url, "answer has no 'compute' object", text, has_value=True)
    location = client.label(url, "compute.location", compute.get("location"))
    found = {"region": location}
    zone = compute.get("zone", "")
    if zone not in ("", None):
        if not isinstance(zone, str) or not _AZURE_ZONE_RE.fullmatch(zone):
            raise MetadataError("azure", url, "compute.zone is not a zone number", zone, has_value=True)
        found["zone"] = client.label(url, "zone", f"{location}-{zone}")
    return found


_PROVIDERS: dict[str, tuple[str, Callable[[str, _Client], Found]]] = {
    "gce": ("gce-metadata", _gce),
    "aws": ("aws-imds", _aws),
    "azure": ("azure-imds", _azure),
}


# --------------------------------------------------------------------------------------------------- discover


def _short_hostname(hostname: Callable[[], str]) -> str:
    return hostname().split(".", 1)[0]


def _node_name(
    node_name: str | None, env: Mapping[str, str], hostname: Callable[[], str], found_by: dict[str, str]
) -> str:
    """The flag, else ``SLURMD_NODENAME``, else the short host name; a name Slurm cannot take is refused."""
    if node_name:
        name, found_by["name"] = node_name, "flag"
    elif env.get("SLURMD_NODENAME"):
        name, found_by["name"] = env["SLURMD_NODENAME"], "env:SLURMD_NODENAME"
    else:
        name, found_by["name"] = _short_hostname(hostname), "hostname"
    if not NODE_NAME_RE.fullmatch(name):
        raise InputError(
            f"node name from {found_by['name']}: must be 1-64 characters from [A-Za-z0-9._-] "
            f"({show_value(name)})"
        )
    return name


def _explicit_levels(
    flags: Mapping[str, str | None], env: Mapping[str, str], found_by: dict[str, str]
) -> dict[str, str]:
    """The levels given by flag, else by environment; a bad label, or a region spelled like a zone, is
    refused."""
    values: dict[str, str] = {}
    for lvl in LEVELS:
        flag_value, env_name = flags[lvl], ENV_LEVELS[lvl]
        if flag_value is not None:
            value, origin = flag_value, f"--{lvl.replace('_', '-')}"
        elif env.get(env_name):
            value, origin = env[env_name], f"env:{env_name}"
        else:
            continue
        if not LABEL_RE.fullmatch(value):
            raise InputError(f"{origin}: must be 1-63 characters from [A-Za-z0-9._-] ({show_value(value)})")
        if lvl == "region" and region_of_zone(value) is not None:
            raise InputError(f"{origin}: {value!r} is spelled like a zone; give it as the zone")
        values[lvl] = value
        found_by[lvl] = "flag" if origin.startswith("--") else origin
    return values


def _from_metadata(
    values: dict[str, str],
    found_by: dict[str, str],
    notes: list[str],
    dmi_root: Path,
    hypervisor_uuid: Path,
    urls: Mapping[str, str],
    budget_s: float,
    clock: Callable[[], float],
) -> None:
    """The levels not given, from the cloud's metadata service (detected from DMI, within ``budget_s`` on
    ``clock``);
    what was given explicitly wins, with a note where the two disagree."""
    cloud, why = detect_cloud(dmi_root, hypervisor_uuid)
    if cloud is None:
        notes.append(f"{why}; nothing asked from the network")
        return
    found_by["cloud"] = f"{cloud} ({why})"
    origin, fetch = _PROVIDERS[cloud]
    client = _Client(cloud, clock() + budget_s, clock)
    try:
        meta = fetch(urls[cloud], client)
    except _NoAnswer as exc:
        notes.append(f"{cloud} metadata: {exc} (budget {budget_s:g} s); no location from metadata")
        meta = {}
    if "_note" in meta:
        notes.append(meta.pop("_note"))
    for lvl, value in meta.items():
        if lvl not in values:
            values[lvl] = value
            found_by[lvl] = origin
        elif values[lvl] != value:
            notes.append(f"{lvl}: {found_by[lvl]} overrides {origin}")


def _reconcile(values: dict[str, str], found_by: dict[str, str], notes: list[str]) -> None:
    """Make the levels agree: a zone names its region (an explicit region that contradicts it is refused,
    a metadata one dropped); a zone or network group with no region to hang under is dropped."""
    parent = region_of_zone(values["zone"]) if "zone" in values else None
    if parent is not None and not zone_in_region(values["zone"], values.get("region", parent)):
        if found_by["region"] in ("flag", "env:GPULAYER_REGION"):
            raise InputError(
                f"zone {values['zone']} ({found_by['zone']}) is not in region {values['region']} "
                f"({found_by['region']})"
            )
        notes.append(
            f"region: {found_by['region']} dropped, zone {values['zone']} ({found_by['zone']}) "
            f"names region {parent}"
        )
        del values["region"]
    if "region" not in values and "zone" in values:
        if parent is not None:
            values["region"], found_by["region"] = parent, "zone name"
    if "region" not in values and "zone" in values:
        notes.append("zone dropped: it names no region and none was given")
        del values["zone"]
        found_by.pop("zone", None)
    if "region" not in values and "network_group" in values:
        notes.append("network group dropped: no region or zone to hang under")
        del values["network_group"]
        found_by.pop("network_group", None)
    if "region" not in values:
        notes.append("no location found")


def discover_node(
    *,
    node_name: str | None = None,
    region: str | None = None,
    zone: str | None = None,
    network_group: str | None = None,
    environ: Mapping[str, str] | None = None,
    dmi_root: Path = DMI_ROOT,
    hypervisor_uuid: Path = HYPERVISOR_UUID,
    gce_url: str = GCE_URL,
    aws_url: str = AWS_URL,
    azure_url: str = AZURE_URL,
    budget_s: float = 1.0,
    clock: Callable[[], float] = time.monotonic,
    hostname: Callable[[], str] = socket.gethostname,
    nvlink_domain: str | None = None,
    nvml: Any = None,
) -> NodeRecord:
    """This node's record (see the module docstring for the order of sources and the trust rules).

    Raises ``InputError`` for a bad name or explicit value, ``MetadataError`` (an ``InputError``) for a
    garbage metadata answer. Never raises for a missing DMI folder or an unreachable/hanging metadata service.
    """
    env = os.environ if environ is None else environ
    found_by: dict[str, str] = {}
    notes: list[str] = []
    name = _node_name(node_name, env, hostname, found_by)
    values = _explicit_levels({"region": region, "zone": zone, "network_group": network_group}, env, found_by)
    if all(lvl in values for lvl in LEVELS):
        notes.append("all levels given explicitly; no metadata asked")
    else:
        urls = {"gce": gce_url, "aws": aws_url, "azure": azure_url}
        _from_metadata(values, found_by, notes, dmi_root, hypervisor_uuid, urls, budget_s, clock)
    _reconcile(values, found_by, notes)
    domain = _nvlink_domain(nvlink_domain, env, nvml, found_by, notes)
    return NodeRecord(
        name=name,
        region=values.get("region"),
        zone=values.get("zone"),
        network_group=values.get("network_group"),
        found_by=tuple(found_by.items()),
        notes=tuple(notes),
        nvlink_domain=domain,
    )


def _nvlink_domain(
    given: str | None, env: Mapping[str, str], nvml: Any, found_by: dict[str, str], notes: list[str]
) -> str | None:
    """Step 4: the argument, ``$GPULAYER_NVLINK_DOMAIN``, else NVML where pynvml (or ``nvml``) is there."""
    if given is not None or env.get(ENV_NVLINK_DOMAIN):
        value, origin = (
            (given, "flag") if given is not None else (env[ENV_NVLINK_DOMAIN], f"env:{ENV_NVLINK_DOMAIN}")
        )
        if not LABEL_RE.fullmatch(value):
            raise InputError(f"{origin}: must be 1-63 characters from [A-Za-z0-9._-] ({show_value(value)})")
        found_by["nvlink_domain"] = origin
        return value
    if nvml is None:
        try:
            import pynvml as nvml  # type: ignore[import-not-found,no-redef,unused-ignore]
        except ImportError:
            return None  # no NVML bindings: nothing to ask, nothing to say
    from ..gpu.fabric import query_nvml

    got = query_nvml(nvml)
    notes.extend(got.notes)
    if got.domain is not None and got.found_by is not None:
        found_by["nvlink_domain"] = got.found_by
    return got.domain
