"""Commands on inventories and generated files: ``generate``, ``lint``, ``show``, ``discover``, ``import``,
``check``, ``files``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from .. import files as shipped
from ..core.errors import ExitCode, InputError
from ..plumbing.entry import read_input
from ..plumbing.output import write_files
from ..plumbing.text import counted
from ..plumbing.version import parse_slurm_patch, parse_slurm_version
from ..policy import GpuAsk, JobRequest, decide, parse_locality, survey
from ..policy.vocab import SEGMENT_RELEASE
from ..render import RenderOptions, make_context, render_all
from ..render.gres_conf import gres_warnings
from ..reports.show import render_tree
from ..slurmconfig.lint import is_block_text, lint_file, lint_topology
from ..slurmconfig.slurmconf import parse_topology_conf
from .common import (
    EXIT_PROBLEMS,
    _check_slurm_version,
    _load,
    _partitions,
    _slurm_nodes,
    _slurm_version,
    _warn,
    cli,
    inventory_option,
    nodes_from_option,
    partitions_option,
    records_option,
    scontrol_option,
    slurm_version_option,
    supported_slurm_text,
)
from .explain import render_check


@cli.command()
@inventory_option
@click.option(
    "--out", "-o", required=True, metavar="DIR", help="Directory to write into (created if missing)."
)
@slurm_version_option("Slurm to render for (default: `scontrol --version`).")
@records_option
@nodes_from_option
@partitions_option
@scontrol_option
@click.option(
    "--assume-minor-equals-index",
    is_flag=True,
    help="gres.conf: File=/dev/nvidia<GPU index> where no NVML minor is known (topo -m captures).",
)
@click.option(
    "--gpu-device-prefix",
    default="/dev/nvidia",
    show_default=True,
    metavar="PATH",
    help="gres.conf: File= is PATH<minor>.",
)
@click.option(
    "--json", "as_json", is_flag=True, help="One JSON object instead of text (README: JSON output)."
)
def generate(
    inventories: tuple[str, ...],
    out: str,
    slurm_version: str | None,
    records_dir: str | None,
    nodes_from: str | None,
    partitions_from: str | None,
    scontrol: bool,
    assume_minor_equals_index: bool,
    gpu_device_prefix: str,
    as_json: bool,
) -> None:
    """Render every output for the merged inventories (and node records) into DIR, all or nothing."""
    import time

    started = time.monotonic()
    options = RenderOptions(assume_minor_equals_index, gpu_device_prefix)  # refuses a bad prefix first
    inventory = _load(inventories, nodes_from, scontrol, records_dir)
    loaded_s = time.monotonic() - started
    if loaded_s > 1.0:  # progress on stderr once the work is long enough to wonder about
        _warn(f"slurm-topo: {len(inventory.nodes)} nodes loaded in {loaded_s:.1f} s; rendering")
    if assume_minor_equals_index and any(n.gpus for n in inventory.nodes):
        _warn(
            "warning: --assume-minor-equals-index: gres.conf names /dev/nvidia<index> where NVML's minor "
            "number "
            "is unknown; check it against `nvidia-smi -q | grep Minor` on those nodes"
        )
    for node in inventory.nodes:
        topo = node.gpu_topology
        if topo is not None:
            for w in topo.warnings:
                _warn(f"warning: {topo.source}: {w}")
    for w in gres_warnings(inventory):  # what Cores= could not read exactly (also in gres.conf itself)
        _warn(f"warning: {w}")
    rendered = render_all(
        inventory, _slurm_version(slurm_version), _partitions(partitions_from, scontrol), options
    )
    if time.monotonic() - started > 2.0:
        _warn(f"slurm-topo: rendered in {time.monotonic() - started:.1f} s; writing {out}")
    files = write_files(out, rendered)
    if as_json:
        click.echo(
            json.dumps(
                {
                    "out": out,
                    "nodes": len(inventory.nodes),
                    "files": [{"path": str(w.path), "status": w.status} for w in files],
                },
                sort_keys=True,
            )
        )
        return
    for written in files:
        click.echo(f"{written.status:9} {written.path}")


@cli.command()
@click.option(
    "--topology",
    "topology",
    required=True,
    metavar="FILE",
    help="topology.conf (tree or block) or topology.yaml.",
)
@nodes_from_option
@scontrol_option
@click.option("--slurm-conf", metavar="FILE", help="slurm.conf: also check that no node is defined twice.")
@click.option(
    "--previous", metavar="FILE", help="The file now live: blocks must keep their order (block/yaml files)."
)
@slurm_version_option("Release the file is for (block files: BlockSizes rules).")
@click.option(
    "--json", "as_json", is_flag=True, help="One JSON object instead of text (README: JSON output)."
)
def lint(
    topology: str,
    nodes_from: str | None,
    scontrol: bool,
    slurm_conf: str | None,
    previous: str | None,
    slurm_version: str | None,
    as_json: bool,
) -> None:
    """Check a topology file for what would make Slurm fail or never place a node."""
    text = read_input(topology)
    records = _slurm_nodes(nodes_from, scontrol)
    known = [r["NodeName"] for r in records] if records is not None else None
    conf = Path(slurm_conf) if slurm_conf else None
    if is_block_text(text) or topology.endswith((".yaml", ".yml")) or previous or slurm_version:
        problems = lint_file(
            text,
            source=topology,
            previous_text=read_input(previous) if previous else None,
            previous_source=previous or "previous",
            slurm_version=parse_slurm_version(slurm_version) if slurm_version else None,
            known_nodes=known,
            slurm_conf=conf,
            slurm_patch=parse_slurm_patch(slurm_version) if slurm_version else None,
        )
        _lint_report(topology, problems, as_json, None)
        return
    switches = parse_topology_conf(text, source=topology)
    problems = lint_topology(switches, known_nodes=known, slurm_conf=conf)
    nodes = sum(len(sw.nodes or ()) for sw in switches)
    _lint_report(topology, problems, as_json, (len(switches), nodes))


def _lint_report(
    topology: str, problems: Sequence[Any], as_json: bool, sizes: tuple[int, int] | None
) -> None:
    """``lint``'s answer: one line per problem (exit 1), else ``ok``; ``--json``: ``{"file", "ok",
    "problems": [{"line", "code", "message"}], "switches", "nodes"}`` (the sizes for tree files)."""
    if as_json:
        doc: dict[str, Any] = {
            "file": topology,
            "ok": not problems,
            "problems": [{"line": p.lineno, "code": p.code, "message": p.message} for p in problems],
        }
        if sizes is not None:
            doc["switches"], doc["nodes"] = sizes
        click.echo(json.dumps(doc, sort_keys=True))
    else:
        for p in problems:
            where = f"{topology}:{p.lineno}" if p.lineno else topology
            click.echo(f"{where}: {p.code}: {p.message}")
    if problems:
        sys.exit(ExitCode.PROBLEMS)
    if as_json:
        return
    if sizes is None:
        click.echo(f"{topology}: ok")
    else:
        click.echo(f"{topology}: ok ({counted(sizes[0], 'switch', 'switches')}, {counted(sizes[1], 'node')})")


@cli.command()
@inventory_option
@records_option
@click.option("--svg", "svg_file", metavar="FILE", help="Also draw the fleet tree as an SVG picture in FILE.")
@nodes_from_option
@scontrol_option
@click.option(
    "--json", "as_json", is_flag=True, help="One JSON object instead of text (README: JSON output)."
)
def show(
    inventories: tuple[str, ...],
    records_dir: str | None,
    svg_file: str | None,
    nodes_from: str | None,
    scontrol: bool,
    as_json: bool,
) -> None:
    """Print the fleet as a tree: region -> zone -> network group, with node and GPU counts."""
    inventory = _load(inventories, records_dir=records_dir)
    records = _slurm_nodes(nodes_from, scontrol)
    svg_line = None
    if svg_file:
        from ..reports.show import write_svg

        svg_line = write_svg(inventory, records, svg_file)
    if as_json:
        from ..reports.show import tree_dict

        doc = tree_dict(inventory)
        if svg_file:
            doc["svg"] = svg_file
        click.echo(json.dumps(doc, sort_keys=True))
        return
    click.echo(render_tree(inventory), nl=False)
    if svg_line:
        click.echo(svg_line)


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="One JSON object instead of a one-entry inventory.")
@click.option("--node-name", metavar="NAME", help="Default: $SLURMD_NODENAME, else `hostname -s`.")
@click.option("--region", metavar="R", help="Also $GPULAYER_REGION.")
@click.option("--zone", metavar="Z", help="Also $GPULAYER_ZONE.")
@click.option("--network-group", metavar="G", help="Also $GPULAYER_NETWORK_GROUP (a rack, a switch, a LAN).")
@click.option(
    "--nvlink-domain",
    metavar="D",
    help="Also $GPULAYER_NVLINK_DOMAIN; else NVML fabric info where available.",
)
@click.option("--dmi-root", default="/sys/class/dmi/id", show_default=True, metavar="DIR", hidden=True)
@click.option("--gce-url", default="http://169.254.169.254/computeMetadata/v1", hidden=True)
@click.option("--aws-url", default="http://169.254.169.254", hidden=True)
@click.option("--azure-url", default="http://169.254.169.254/metadata", hidden=True)
def discover(
    as_json: bool,
    node_name: str | None,
    region: str | None,
    zone: str | None,
    network_group: str | None,
    nvlink_domain: str | None,
    dmi_root: str,
    gce_url: str,
    aws_url: str,
    azure_url: str,
) -> None:
    """Print this node's location record (flags, environment, then its own cloud's metadata; never
    slurmctld)."""
    from ..sources.discover import discover_node, record_json, record_yaml

    rec = discover_node(
        node_name=node_name,
        region=region,
        zone=zone,
        network_group=network_group,
        nvlink_domain=nvlink_domain,
        dmi_root=Path(dmi_root),
        gce_url=gce_url,
        aws_url=aws_url,
        azure_url=azure_url,
    )
    click.echo(record_json(rec) if as_json else record_yaml(rec), nl=False)


@cli.command("import")
@click.argument("provider", metavar="PROVIDER", type=click.Choice(["gcp", "aws", "azure"]))
@click.argument("listing", metavar="FILE")
@click.option(
    "--name-map",
    "name_map",
    multiple=True,
    metavar="REGEX=REPLACEMENT",
    help="Instance name -> Slurm node name; the first rule matching the whole name wins (repeatable).",
)
@click.option("--strip-suffix", metavar="SUFFIX", help="Node name = instance name without SUFFIX.")
@click.option(
    "--aws-name",
    default="tag:Name",
    show_default=True,
    metavar="tag:KEY|private-dns|instance-id",
    help="AWS: where an instance's name comes from.",
)
@click.option(
    "--topology",
    "topology_file",
    metavar="FILE",
    help="AWS: `aws ec2 describe-instance-topology` output, joined by instance id (network nodes, "
    "capacity blocks).",
)
@click.option(
    "--zone-map",
    "zone_map_file",
    metavar="FILE",
    help="Azure: `az account list-locations` output (logical zone -> physical zone).",
)
@click.option(
    "--json", "as_json", is_flag=True, help="One JSON object instead of text (README: JSON output)."
)
def import_cmd(
    provider: str,
    listing: str,
    name_map: tuple[str, ...],
    strip_suffix: str | None,
    aws_name: str,
    topology_file: str | None,
    zone_map_file: str | None,
    as_json: bool,
) -> None:
    """Turn a cloud's own instance listing (gcloud/aws/az JSON, from a file) into a trusted provider
    inventory. PROVIDER: gcp, aws or azure."""
    from ..sources.providers import Companion, NameRule, import_listing

    if name_map and strip_suffix:
        raise click.UsageError("give --name-map or --strip-suffix, not both")

    def read(path: str) -> str:
        try:
            return Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError(f"{path}: cannot read: {getattr(exc, 'strerror', None) or exc}") from None

    text = read(listing)
    topology = Companion(read(topology_file), topology_file) if topology_file else None
    zones = Companion(read(zone_map_file), zone_map_file) if zone_map_file else None
    rule = NameRule.strip_suffix(strip_suffix) if strip_suffix else NameRule.parse(name_map)
    result = import_listing(
        provider,
        text,
        source=listing,
        name_rule=rule,
        aws_name=aws_name,
        topology=topology,
        zone_map=zones,
    )
    if as_json:  # the same inventory as a JSON object, and the warnings in it
        import yaml

        doc = yaml.safe_load(result.text) or {}
        click.echo(json.dumps({"inventory": doc, "warnings": list(result.warnings)}, sort_keys=True))
        return
    for line in result.warnings:
        _warn(f"warning: {line}")
    click.echo(result.text, nl=False)


@cli.command()
@inventory_option
@click.option(
    "--locality", required=True, metavar="LEVEL[:MODE]", help="prefer|nvl|network_group|zone|region|any."
)
@click.option("--regions", metavar="LIST", help="As --locality-regions: regions or zones, comma-separated.")
@click.option("-N", "--nodes", type=click.IntRange(1), help="Nodes (sbatch -N).")
@click.option("--gpus", type=click.IntRange(1), help="GPUs for the whole job (sbatch --gpus).")
@click.option("--gpus-per-node", metavar="[TYPE:]N", help="GPUs per node (sbatch --gpus-per-node).")
@click.option("--constraint", "-C", metavar="C", help="The job's own --constraint.")
@click.option("--partition", "-p", metavar="P", help="Partition (default: the default partition).")
@partitions_option
@scontrol_option
@click.option(
    "--slurm-version",
    metavar="X.Y[.Z]",
    callback=_check_slurm_version,
    help=(
        "Release the filter runs on (default: 22.05's rules). From 25.11.2 the filter sets segment_size "
        "for --locality nvl:segment=N (a job larger than one NVLink domain); before, it refuses it. "
        "25.11 without a patch level counts as 25.11.0 (refused): give 25.11.2. "
        f"One of {supported_slurm_text()}."
    ),
)
@click.option("--json", "as_json", is_flag=True, help="One JSON object instead of text.")
@click.option("--verbose", "-v", is_flag=True, help="Also name the groups that are too small.")
def check(
    inventories: tuple[str, ...],
    locality: str,
    regions: str | None,
    nodes: int | None,
    gpus: int | None,
    gpus_per_node: str | None,
    constraint: str | None,
    partition: str | None,
    partitions_from: str | None,
    scontrol: bool,
    slurm_version: str | None,
    as_json: bool,
    verbose: bool,
) -> None:
    """What the submit filter would do with a job, from the inventories alone. Exit 0 accept, 1 reject."""
    parse_locality(locality)
    if gpus and gpus_per_node:
        raise click.UsageError("give --gpus or --gpus-per-node, not both")
    gpu = GpuAsk("job", None, gpus) if gpus else None
    if gpus_per_node:
        gtype, _, count = gpus_per_node.rpartition(":")
        if not count.isdigit() or int(count) < 1:
            raise click.UsageError(f"--gpus-per-node: expected [TYPE:]N, got {gpus_per_node!r}")
        gpu = GpuAsk("node", gtype or None, int(count))
    release = parse_slurm_version(slurm_version) if slurm_version else (22, 5)
    ctx = make_context(_load(inventories), release, _partitions(partitions_from, scontrol))
    req = JobRequest(
        locality=locality,
        regions=regions,
        features=constraint,
        partition=partition,
        min_nodes=nodes,
        gpu=gpu,
        segment_ok=takes_segments(slurm_version),
    )
    decision = decide(ctx.policy, req)
    level = decision.level or parse_locality(locality)[0]
    required = level in ("network_group", "zone", "region") and not decision.locality.startswith("prefer")
    found = survey(ctx.policy, req, level) if required else None  # prefer: the cascade's own candidates
    click.echo(render_check(decision, found, level, verbose, as_json), nl=False)
    if decision.action == "reject":
        sys.exit(EXIT_PROBLEMS)


def takes_segments(slurm_version: str | None) -> bool:
    """Whether the filter on ``slurm_version`` (``X.Y`` or ``X.Y.Z``) can write ``segment_size``: from
    :data:`~slurm_topo.policy.vocab.SEGMENT_RELEASE` (25.11.2) on; a release without its patch level counts
    as the series' first (25.11 is 25.11.0)."""
    if not slurm_version:
        return False
    given = (*parse_slurm_version(slurm_version), parse_slurm_patch(slurm_version) or 0)
    first = (*parse_slurm_version(SEGMENT_RELEASE), parse_slurm_patch(SEGMENT_RELEASE) or 0)
    return given >= first


@cli.command("files")
@click.option("--copy", "copy_to", metavar="DIR", help="Copy the shipped Slurm-side files into DIR.")
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help='One JSON object: {"files": [NAME, ...], "copied_to": DIR or null} (README: JSON output).',
)
def files_cmd(copy_to: str | None, as_json: bool) -> None:
    """List (or copy out) the files slurm-topo ships for Slurm: job_submit/, gres/, examples/, contrib/."""
    if copy_to:
        target = Path(copy_to)
        copied = shipped.copy_to(target)
        if as_json:
            names = [path.relative_to(target).as_posix() for path in copied]
            click.echo(json.dumps({"files": names, "copied_to": copy_to}, sort_keys=True))
            return
        for path in copied:
            click.echo(f"copied    {path}")
    elif as_json:
        click.echo(json.dumps({"files": shipped.names(), "copied_to": None}, sort_keys=True))
    else:
        for name in shipped.names():
            click.echo(name)
