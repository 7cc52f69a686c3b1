"""``slurm-topo``: a thin click layer over the library.

Errors map to exit codes in one place: ``main`` runs the group through :func:`slurm_topo.entry.run_entry`,
which prints ``slurm-topo: error: …`` and exits with :func:`slurm_topo.errors.exit_code_for` (the table is
:class:`slurm_topo.errors.ExitCode`, shown in README "Exit codes"). click's own usage errors become
:class:`~slurm_topo.errors.UsageError` (exit 2) and Ctrl-C exits 130. A command that found problems
(``lint``, ``check``) exits 1 itself; ``apply`` exits with its outcome.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from . import files as shipped
from .access import argv as slurm_argv
from .access.text import parse_scontrol_nodes, parse_scontrol_partitions
from .entry import read_input, run_entry
from .errors import CommandError, ExitCode, InputError, UsageError
from .inventory import Loaded, load_inventory_file, merge, with_slurm_nodes
from .lint import is_block_text, lint_file, lint_topology
from .model import LABEL_RE, Inventory
from .output import write_files
from .policy import Decision, GpuAsk, JobRequest, Partition, Survey, decide, parse_locality, survey
from .render import RenderOptions, make_context, render_all
from .render.gres_conf import gres_warnings
from .runner import SubprocessRunner
from .show import render_tree
from .slurmconf import parse_topology_conf
from .text import counted
from .version import DEFAULT_SLURM, __version__, format_slurm_version, parse_slurm_version

PROG = "slurm-topo"
EXIT_PROBLEMS = ExitCode.PROBLEMS  # kept for the commands that exit 1 themselves


def _warn(message: str) -> None:
    click.echo(message, err=True)


def _slurm_nodes(nodes_from: str | None, scontrol: bool) -> list[dict[str, str]] | None:
    if nodes_from and scontrol:
        raise InputError("give --nodes-from or --scontrol, not both")
    if nodes_from:
        try:
            text = Path(nodes_from).read_text(encoding="utf-8")
        except OSError as exc:
            raise InputError(f"{nodes_from}: cannot read: {exc.strerror}") from None
        return parse_scontrol_nodes(text, source=nodes_from)
    if scontrol:
        return parse_scontrol_nodes(SubprocessRunner().run(slurm_argv.show_nodes()))
    return None


def _load(
    inventories: tuple[str, ...],
    nodes_from: str | None = None,
    scontrol: bool = False,
    records_dir: str | None = None,
) -> Inventory:
    if not inventories and not records_dir:
        raise click.UsageError("give at least one --inventory FILE or --records DIR")
    from .model import MAX_NODES

    loaded: list[Loaded] = []
    for path in inventories:  # one budget for all files: each is counted before it is expanded
        loaded.append(load_inventory_file(path, MAX_NODES - sum(len(x.nodes) for x in loaded)))
    if records_dir:
        from .records import load_records

        found, skipped = load_records(Path(records_dir))
        for line in skipped:
            _warn(f"warning: {line}")
        loaded.extend(found)
    inventory = merge(loaded)
    records = _slurm_nodes(nodes_from, scontrol)
    if records is not None:
        inventory = with_slurm_nodes(inventory, records, nodes_from or "scontrol show node")
        if inventory.extra_nodes:
            _warn(
                f"{len(inventory.extra_nodes)} nodes Slurm knows are in no inventory; placed in the root's "
                f"leaf: {' '.join(inventory.extra_nodes)}"
            )
    if records_dir:
        from .health.drain import load_effects
        from .health.effects import apply_effects

        # DIR/health/: degraded nodes are kept as a last resort, down NVLinks leave Links= (docs/health.md)
        inventory, changes = apply_effects(inventory, load_effects(Path(records_dir)))
        for line in changes:
            _warn(f"health: {line}")
    for warning in inventory.warnings:
        _warn(f"warning: {warning}")
    for conflict in inventory.conflicts:
        _warn(conflict.message())
    return inventory


def _slurm_version(given: str | None) -> tuple[int, int]:
    if given:
        return parse_slurm_version(given)
    runner = SubprocessRunner()
    # `scontrol --version` needs a readable slurm.conf on 22.05; the daemons' -V does not.
    for argv in slurm_argv.version_argvs():
        if runner.available(argv[0]):
            try:
                return parse_slurm_version(runner.run(argv, timeout=10))
            except (CommandError, InputError):
                continue
    _warn(
        "no Slurm found to ask and no --slurm-version: rendering for Slurm "
        f"{format_slurm_version(DEFAULT_SLURM)}"
    )
    return DEFAULT_SLURM


def _partitions(partitions_from: str | None, scontrol: bool) -> list[Partition] | None:
    if partitions_from:
        rows = parse_scontrol_partitions(read_input(partitions_from), source=partitions_from)
    elif scontrol:
        rows = parse_scontrol_partitions(SubprocessRunner().run(slurm_argv.show_partitions()))
    else:
        return None
    for name, _, _ in rows:
        if not LABEL_RE.match(name):
            raise InputError(f"partition name {name[:40]!r} is not 1-63 characters from [A-Za-z0-9._-]")
    return [Partition(name, tuple(nodes), default) for name, nodes, default in rows]


partitions_option = click.option(
    "--partitions-from",
    metavar="FILE",
    help="Partitions: saved `scontrol show partition -o` (default: one partition holding every node).",
)

inventory_option = click.option(
    "--inventory",
    "-i",
    "inventories",
    multiple=True,
    metavar="FILE",
    help="Inventory YAML; repeat to merge several (trust: provider > operator > self).",
)
records_option = click.option(
    "--records",
    "records_dir",
    metavar="DIR",
    help="A folder of node records written by `slurm-topo discover` (always trusted as self-reports).",
)
nodes_from_option = click.option(
    "--nodes-from",
    metavar="FILE",
    help="Nodes Slurm knows: `scontrol show node -o` output or a hostlist per line.",
)
scontrol_option = click.option(
    "--scontrol", is_flag=True, help="Ask the running Slurm (`scontrol show node -o`)."
)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="slurm-topo")
def cli() -> None:
    """Write a GPU fleet's shape as Slurm configuration (topology.conf, node features, ...)."""


@cli.command()
@inventory_option
@click.option(
    "--out", "-o", required=True, metavar="DIR", help="Directory to write into (created if missing)."
)
@click.option("--slurm-version", metavar="X.Y", help="Slurm to render for (default: `scontrol --version`).")
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
@click.option(
    "--slurm-version", metavar="X.Y", help="Release the file is for (block files: BlockSizes rules)."
)
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
        from .show import write_svg

        svg_line = write_svg(inventory, records, svg_file)
    if as_json:
        from .show import tree_dict

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
    from .discover import discover_node, record_json, record_yaml

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
@click.argument("provider", type=click.Choice(["gcp", "aws", "azure"]))
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
    "--json", "as_json", is_flag=True, help="One JSON object instead of text (README: JSON output)."
)
def import_cmd(
    provider: str,
    listing: str,
    name_map: tuple[str, ...],
    strip_suffix: str | None,
    aws_name: str,
    as_json: bool,
) -> None:
    """Turn a cloud's own instance listing (gcloud/aws/az JSON, from a file) into a trusted provider
    inventory."""
    from .providers import NameRule, import_listing

    if name_map and strip_suffix:
        raise click.UsageError("give --name-map or --strip-suffix, not both")
    try:
        text = Path(listing).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{listing}: cannot read: {getattr(exc, 'strerror', None) or exc}") from None
    rule = NameRule.strip_suffix(strip_suffix) if strip_suffix else NameRule.parse(name_map)
    result = import_listing(provider, text, source=listing, name_rule=rule, aws_name=aws_name)
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
    ctx = make_context(_load(inventories), (22, 5), _partitions(partitions_from, scontrol))
    req = JobRequest(
        locality=locality, regions=regions, features=constraint, partition=partition, min_nodes=nodes, gpu=gpu
    )
    decision = decide(ctx.policy, req)
    level = decision.level or parse_locality(locality)[0]
    required = level in ("network_group", "zone", "region") and not decision.locality.startswith("prefer")
    found = survey(ctx.policy, req, level) if required else None  # prefer: the cascade's own candidates
    click.echo(render_check(decision, found, level, verbose, as_json), nl=False)
    if decision.action == "reject":
        sys.exit(EXIT_PROBLEMS)


@cli.group()
def gpu() -> None:
    """GPUs inside a node: read `nvidia-smi topo -m`, NVLink islands, the best free GPUs for a task."""


def _topology(path: str | None, nvml: bool = False):  # type: ignore[no-untyped-def]
    """A GPU topology from a `nvidia-smi topo -m` capture, or (``nvml``) from this machine's NVML."""
    if nvml == (path is not None):
        raise click.UsageError("give a `nvidia-smi topo -m` capture FILE or --nvml, not both or neither")
    if nvml:
        from .gpu.nvml import read_nvml

        topo = read_nvml().topology
        source = "nvml"
    else:
        from .gpu import parse_topo_matrix

        try:
            text = Path(path).read_text(encoding="utf-8", errors="replace")  # type: ignore[arg-type]
        except OSError as exc:
            raise InputError(f"{path}: cannot read: {exc.strerror}") from None
        topo = parse_topo_matrix(text, source=str(path))
        source = str(path)
    for w in topo.warnings:
        _warn(f"warning: {source}: {w}")
    return topo


nvml_option = click.option(
    "--nvml", is_flag=True, help="Read this machine's GPUs through NVML (nvidia-ml-py)."
)


@gpu.command("parse")
@click.argument("file", required=False)
@nvml_option
@click.option("--json", "as_json", is_flag=True, help="One JSON object: gpus, matrix, nics, affinity.")
def gpu_parse(file: str | None, nvml: bool, as_json: bool) -> None:
    """Read a `nvidia-smi topo -m` capture (or NVML); a file that cannot be read exactly is refused."""
    topo = _topology(file, nvml)
    if as_json:
        click.echo(
            json.dumps(
                {
                    "gpus": list(topo.gpus),
                    "matrix": [list(r) for r in topo.matrix],
                    "nics": list(topo.nics),
                    "nic_matrix": [list(r) for r in topo.nic_matrix],
                    "cpu_affinity": list(topo.cpu_affinity),
                    "numa_affinity": list(topo.numa_affinity),
                }
            )
        )
        return
    width = max([4, *(len(c) for row in topo.matrix for c in row)]) + 1
    click.echo(" " * 6 + "".join(f"GPU{g}".ljust(width) for g in topo.gpus) + "CPU affinity")
    for i, row in enumerate(topo.matrix):
        aff = topo.cpu_affinity[i] if i < len(topo.cpu_affinity) else None
        click.echo(f"GPU{topo.gpus[i]}".ljust(6) + "".join(c.ljust(width) for c in row) + (aff or "-"))


@gpu.command("islands")
@click.argument("file", required=False)
@nvml_option
@click.option("--json", "as_json", is_flag=True, help='One JSON object: {"islands": [[GPU, ...], ...]}.')
def gpu_islands(file: str | None, nvml: bool, as_json: bool) -> None:
    """NVLink islands: the maximal groups of GPUs joined by NVLink."""
    from .gpu import islands

    found = [sorted(island) for island in islands(_topology(file, nvml))]
    if as_json:
        click.echo(json.dumps({"islands": found}))
        return
    for i, island in enumerate(found):
        click.echo(f"island {i}: GPUs {','.join(map(str, island))}")


@gpu.command("pick")
@click.option(
    "--topology", "topology_file", required=True, metavar="FILE", help="A `nvidia-smi topo -m` capture."
)
@click.option("--count", "-k", required=True, type=click.IntRange(1), help="How many GPUs the task needs.")
@click.option("--busy", default="", metavar="LIST", help="GPU indices already in use, e.g. 0,3.")
@click.option("--json", "as_json", is_flag=True, help='One JSON object: {"gpus": [...]}.')
def gpu_pick(topology_file: str, count: int, busy: str, as_json: bool) -> None:
    """The free GPUs whose slowest link is fastest (then most bandwidth, fewest islands broken, lowest
    ids)."""
    from .gpu import pick_devices

    topo = _topology(topology_file)
    try:
        busy_ids = {int(x) for x in busy.split(",") if x.strip()}
    except ValueError:
        raise click.UsageError(f"--busy: expected GPU indices like 0,3, got {busy!r}") from None
    unknown = busy_ids - set(topo.gpus)
    if unknown:
        raise click.UsageError(f"--busy: no GPU {sorted(unknown)[0]} in {topology_file}")
    chosen = pick_devices(topo, [g for g in topo.gpus if g not in busy_ids], count)
    click.echo(json.dumps({"gpus": sorted(chosen)}) if as_json else ",".join(map(str, sorted(chosen))))


@cli.command()
@inventory_option
@records_option
@click.option(
    "--slurm-dir", required=True, metavar="DIR", help="Where the live Slurm files are (e.g. /etc/slurm)."
)
@click.option(
    "--state-dir",
    default="/var/lib/slurm-topo",
    show_default=True,
    metavar="DIR",
    help="Lock, journal, state and the last 10 sets of backups (never inside --slurm-dir).",
)
@click.option("--slurm-version", metavar="X.Y", help="The running Slurm (default: `scontrol --version`).")
@nodes_from_option
@partitions_option
@scontrol_option
@click.option("--assume-minor-equals-index", is_flag=True, help="As for generate (gres.conf File=).")
@click.option("--gpu-device-prefix", default="/dev/nvidia", show_default=True, metavar="PATH")
@click.option("--dry-run", is_flag=True, help="Say what would change; write nothing.")
@click.option("--no-reconfigure", is_flag=True, help="Write the files but never contact slurmctld.")
@click.option("--adopt", is_flag=True, help="Take over live files without slurm-topo's header (once).")
@click.option(
    "--no-slurm-check",
    is_flag=True,
    help="Do not prove a changed set with a throwaway slurmctld before it goes live (docs/apply.md).",
)
@click.option(
    "--slurm-check-timeout",
    default=60.0,
    show_default=True,
    type=click.FloatRange(1, 3600),
    metavar="S",
    help="Seconds the throwaway slurmctld may take, plus 12 ms per node of the set (a timeout refuses).",
)
@click.option(
    "--force",
    is_flag=True,
    help="Apply over --max-removal, pending jobs naming a removed group and NVLink blocks that would move.",
)
@click.option(
    "--max-removal",
    default=0.2,
    show_default=True,
    type=click.FloatRange(0, 1),
    help="Refuse when more than this share of nodes would disappear.",
)
@click.option(
    "--min-interval",
    default=60.0,
    show_default=True,
    type=click.FloatRange(0),
    help="Seconds between two reconfigures (a change inside it waits for the next run).",
)
@click.option("--sync-cmd", metavar="CMD", help="Run before reconfiguring (copy the files to the nodes).")
@click.option(
    "--lock-wait",
    default=60.0,
    show_default=True,
    type=click.FloatRange(0),
    help="Seconds to wait for another apply writing the same --slurm-dir, then refuse.",
)
@click.option(
    "--detailed-exitcodes",
    is_flag=True,
    help="Exit 10 when something was applied (or a dry run would apply).",
)
@click.option("--recover", "mode", flag_value="recover", help="Only finish or revert a half-done run.")
@click.option("--rollback", "mode", flag_value="rollback", help="Put the previous set back.")
@click.option(
    "--json", "as_json", is_flag=True, help="One JSON object instead of text (README: JSON output)."
)
def apply(
    inventories: tuple[str, ...],
    records_dir: str | None,
    slurm_dir: str,
    state_dir: str,
    slurm_version: str | None,
    nodes_from: str | None,
    partitions_from: str | None,
    scontrol: bool,
    assume_minor_equals_index: bool,
    gpu_device_prefix: str,
    dry_run: bool,
    no_reconfigure: bool,
    adopt: bool,
    no_slurm_check: bool,
    slurm_check_timeout: float,
    force: bool,
    max_removal: float,
    min_interval: float,
    sync_cmd: str | None,
    lock_wait: float,
    detailed_exitcodes: bool,
    mode: str | None,
    as_json: bool,
) -> None:
    """Keep Slurm true (cron/systemd): regenerate, lint, stage, reconfigure only on change, verify, roll back.

    Exit: 0 applied, unchanged, deferred or dry run (the summary says which; 10 for applied, or a dry run
    that would apply, with --detailed-exitcodes), 11 refused (nothing changed), 12 failed and rolled back,
    13 rollback failed or journal unreadable (look, then --recover). Every run prints one summary line.
    """
    from .apply import ApplyOptions, recover, rollback, run_apply

    options = ApplyOptions(
        slurm_dir=Path(slurm_dir),
        state_dir=Path(state_dir),
        dry_run=dry_run,
        no_reconfigure=no_reconfigure,
        adopt=adopt,
        slurm_check=not no_slurm_check,
        slurm_check_timeout=slurm_check_timeout,
        force=force,
        max_removal=max_removal,
        min_interval=min_interval,
        sync_cmd=sync_cmd,
        lock_wait=lock_wait,
        detailed_exitcodes=detailed_exitcodes,
        slurm_version=parse_slurm_version(slurm_version) if slurm_version else None,
        progress=_warn,
    )
    runner = SubprocessRunner()
    if mode == "recover":
        result = recover(options, runner)
    elif mode == "rollback":
        result = rollback(options, runner)
    else:
        inventory = _load(inventories, nodes_from, scontrol, records_dir)
        version = options.slurm_version or _slurm_version(None)
        rendered = render_all(
            inventory,
            version,
            _partitions(partitions_from, scontrol),
            RenderOptions(assume_minor_equals_index, gpu_device_prefix),
        )
        result = run_apply(options, rendered, runner)
    if as_json:
        doc = {
            "status": result.status,
            "exit_code": int(result.exit_code),
            "summary": result.summary,
            "details": list(result.details),
            "changed": list(result.changed),
            "reconfigured": result.reconfigured,
        }
        click.echo(json.dumps(doc, sort_keys=True))
    else:
        for line in result.details:
            _warn(line)
        click.echo(result.summary)
    sys.exit(result.exit_code)


@cli.command()
@click.argument("job_id", metavar="JOBID")
@inventory_option
@records_option
@click.option(
    "--plan", metavar="PLAN", help="The job's parallelism plan, e.g. tp=8,pp=4,bytes=10G (over its comment)."
)
@click.option(
    "--links", "links_file", metavar="FILE", help="Link constants (a links: mapping) over the defaults."
)
@click.option("--svg", "svg_file", metavar="FILE", help="Draw where the job landed and the best placement.")
@click.option(
    "--json", "as_json", is_flag=True, help="One JSON object instead of text (README: JSON output)."
)
def explain(
    job_id: str,
    inventories: tuple[str, ...],
    records_dir: str | None,
    plan: str | None,
    links_file: str | None,
    svg_file: str | None,
    as_json: bool,
) -> None:
    """What a job asked for, what the locality filter decided, and where Slurm placed it (or why it waits).

    With -i FILE (the fleet) and a plan (--plan, else the job's --comment=plan=tp=…,pp=…,bytes=…): the
    predicted communication seconds per step of its placement, of the best placement free right now (its own
    nodes counted as free) and of the best on an idle fleet."""
    from .explain import explain_full, write_overlay

    if not job_id.replace("_", "").replace("+", "").isdigit():
        raise click.UsageError(f"JOBID must be a job id such as 1234, 1234_5 or 1234+1, not {job_id!r}")
    if plan is not None:
        from .cost import parse_plan

        parse_plan(plan)  # a bad --plan is an input error before slurmctld is asked
    if svg_file and not (inventories or records_dir):
        raise click.UsageError("--svg needs the fleet: give -i FILE")
    inventory = _load(inventories, records_dir=records_dir) if inventories or records_dir else None
    table = _links_table(inventories, links_file)
    explanation, view = explain_full(
        job_id, SubprocessRunner(), inventory=inventory, plan=plan, table=table, want_states=bool(svg_file)
    )
    if as_json:
        import dataclasses

        doc: dict[str, Any] = {"known": bool(explanation.state), **dataclasses.asdict(explanation)}
        if svg_file and inventory is not None and explanation.state:
            doc["svg"] = write_overlay(inventory, explanation, view, svg_file)
        click.echo(json.dumps(doc, sort_keys=True))
        return
    if not explanation.state:
        click.echo(f"job {job_id}: not known to slurmctld")
        return
    click.echo(explanation.text(), nl=False)
    if svg_file and inventory is not None:
        click.echo(write_overlay(inventory, explanation, view, svg_file))


@cli.command("files")
@click.option("--copy", "copy_to", metavar="DIR", help="Copy the shipped Slurm-side files into DIR.")
def files_cmd(copy_to: str | None) -> None:
    """List (or copy out) the files slurm-topo ships for Slurm: job_submit/, gres/, examples/."""
    if copy_to:
        for path in shipped.copy_to(Path(copy_to)):
            click.echo(f"copied    {path}")
    else:
        for name in shipped.names():
            click.echo(name)


def render_check(decision: Decision, found: Survey | None, level: str, verbose: bool, as_json: bool) -> str:
    """Text (or JSON) for `check`: line 1 accept|reject, then what the filter would do and why."""
    verdict = "reject" if decision.action == "reject" else "accept"
    fitting = found.fitting if found else tuple(decision.candidates)
    small = found.too_small if found else ()
    if as_json:
        return (
            json.dumps(
                {
                    "decision": verdict,
                    **decision.as_dict(),
                    "level": level,
                    "candidates": [{"group": g, "nodes": n, "gpus": gp} for g, n, gp in fitting],
                    "excluded": [{"group": g, "nodes": n, "gpus": gp} for g, n, gp in small],
                },
                indent=2,
            )
            + "\n"
        )
    lines = [verdict]
    if decision.action == "hold":
        lines.append(
            "held: the job would wait (priority 0, Reason=JobHeldUser; its owner's release is refused) until "
            "it is resized or an administrator releases it"
        )
    if decision.message:
        lines.append(decision.message)
    if decision.features:
        lines.append(f"features: {decision.features}")
    if decision.prefer:
        lines.append(f"prefer: {decision.prefer}")
    if fitting and decision.action != "reject":
        lines.append("candidates: " + ", ".join(f"{g} ({n} nodes, {gp} GPUs)" for g, n, gp in fitting))
    if small:
        lines.append(
            f"excluded: {len(small)} {level.replace('_', ' ')}{'s' if len(small) != 1 else ''} too small"
            + (": " + ", ".join(f"{g} ({n} nodes, {gp} GPUs)" for g, n, gp in small) if verbose else "")
        )
    lines.append(f"record: {decision.record}")
    return "\n".join(lines) + "\n"


def _click_error(exc: click.ClickException) -> UsageError:
    """click's own error as ours: one line, ``slurm-topo: error: …``, with where to look for help."""
    message = exc.format_message().rstrip(".")
    if message[:2].istitle():  # click's "Invalid value …", "No such option …": our lines start lower-case
        message = message[0].lower() + message[1:]
    ctx = getattr(exc, "ctx", None)
    if isinstance(exc, click.UsageError) and ctx is not None:
        message += f" (see '{ctx.command_path} --help')"
    return UsageError(message)


def _invoke(argv: list[str] | None) -> None:
    """Run the click group; click's exceptions become ours, so that ``run_entry`` maps every one."""
    try:
        cli.main(args=argv, prog_name=PROG, standalone_mode=False)
    except click.exceptions.Exit as exc:  # --help, --version
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:  # click turns Ctrl-C into Abort
        raise KeyboardInterrupt from None
    except click.ClickException as exc:
        no_args = getattr(click.exceptions, "NoArgsIsHelpError", ())  # click >= 8.2
        if isinstance(exc, no_args) and exc.ctx is not None:  # a bare `slurm-topo` (or `slurm-topo gpu`)
            click.echo(exc.ctx.get_help(), err=True)
            raise UsageError(f"give a command (see '{exc.ctx.command_path} --help')") from None
        raise _click_error(exc) from None


# ---- cost, capacity: the communication cost model (slurm_topo.cost) and topology-feasible capacity


def _links_table(inventories: tuple[str, ...], links_file: str | None):  # type: ignore[no-untyped-def]
    """The link constants: defaults, then the inventories' ``links:`` mappings, then ``--links FILE``."""
    import re

    from .cost import DEFAULT_TABLE, parse_links
    from .inventory import load_yaml

    table, given = DEFAULT_TABLE, None
    for path in (*inventories, *([links_file] if links_file else [])):
        text = read_input(path)
        has_links = re.search(r"(^|[{,])\s*[\"']?links[\"']?\s*:", text, re.MULTILINE)
        if path != links_file and not has_links:
            continue  # no top-level links: (parsing a large inventory twice costs seconds)
        doc = load_yaml(text)
        raw = doc.get("links") if isinstance(doc, dict) else None
        if path == links_file and isinstance(doc, dict) and "links" not in doc:
            raw = doc  # a file holding the mapping itself
        if raw is None:
            continue
        if given is not None and path != links_file and raw != given:
            raise InputError(f"{path}: links: differs from an earlier inventory's; give links: once")
        table = parse_links(raw, source=f"{path}: links", base=table)
        given = raw
    return table


def _seconds(value: float) -> str:
    return f"{value:.4f} s" if value >= 0.001 or value == 0 else f"{value:.3g} s"


def _cost_json(prediction, spec) -> dict[str, object]:  # type: ignore[no-untyped-def]
    cur, best = prediction.current, prediction.best
    top = cur.bottleneck
    return {
        "seconds": cur.seconds,
        "terms": [t.as_dict() for t in cur.terms],
        "bottleneck": top.level if top else None,
        "bottleneck_term": top.kind if top else None,
        "nodes": list(cur.nodes),
        "plan": {**cur.sizes, "gpus_per_node": spec.gpus_per_node, "order": spec.order},
        "best_seconds": best.seconds if best else None,
        "best_nodes": list(best.nodes) if best else None,
        "best_level": prediction.best_level,
        "slowdown": prediction.slowdown,
        "comm_slowdown": prediction.comm_slowdown,
        "compute_seconds": prediction.step.compute_s,
        "overlap": prediction.step.overlap,
        "step_seconds": prediction.current_step,
        "best_step_seconds": prediction.best_step,
        "assumed": prediction.step.source,
        "notes": list(cur.notes),
    }


def _cost_text(prediction, spec) -> str:  # type: ignore[no-untyped-def]
    from .hostlist import compress

    cur, best = prediction.current, prediction.best
    s = cur.sizes
    lines = [
        f"placement: {counted(len(cur.nodes), 'node')} {compress(cur.nodes)} × "
        f"{counted(spec.gpus_per_node or 0, 'GPU')}, "
        f"tp {s['tp']} × pp {s['pp']} × dp {s['dp']}: {_seconds(cur.seconds)} of communication per step"
    ]
    for t in cur.terms:
        lines.append(
            f"  {t.kind}  {counted(t.groups, 'group')} of {t.ranks} ranks, {t.bytes / 1e9:g} GB each: "
            f"{t.level} ({t.bandwidth:g} GB/s, {t.latency_us:g} µs/hop)  {_seconds(t.seconds)}"
        )
    lines += [f"  note: {n}" for n in cur.notes]
    top = cur.bottleneck
    if top is not None:
        lines.append(f"bottleneck: {top.kind} at {top.level}")
    if prediction.step.compute_s is not None:
        lines.append(f"step: {_seconds(prediction.current_step)} (assumed: {prediction.step.source})")
    else:
        lines.append(f"assumed: {prediction.step.source}")
    if best is None:
        lines.append("best placement: none (the fleet has no other room for this shape)")
    else:
        lines.append(
            f"best placement on the idle fleet: {compress(best.nodes)} "
            f"(one {(prediction.best_level or '').replace('_', ' ')}): "
            f"{_seconds(best.seconds)}"
        )
        comm = prediction.comm_slowdown
        if prediction.slowdown is not None and comm is not None and prediction.step.compute_s is not None:
            lines.append(
                f"slowdown: {prediction.slowdown:.2f}× per step ({(prediction.slowdown - 1) * 100:.0f} % "
                f"slower; communication {comm:.2f}×)"
            )
        elif prediction.slowdown is not None:
            lines.append(
                f"slowdown: {prediction.slowdown:.2f}× ({(prediction.slowdown - 1) * 100:.0f} % slower)"
            )
    return "\n".join(lines) + "\n"


@cli.command()
@inventory_option
@records_option
@click.option("--nodes", "nodelist", required=True, metavar="HOSTLIST", help="The placement, e.g. n[1-8].")
@click.option("--gpus-per-node", type=int, metavar="G", help="GPUs per node (default: the nodes' smallest).")
@click.option("--tp", default=1, show_default=True, type=click.IntRange(1), help="Tensor-parallel size.")
@click.option("--pp", default=1, show_default=True, type=click.IntRange(1), help="Pipeline stages.")
@click.option("--dp", type=click.IntRange(1), help="Data-parallel replicas (default: what the GPUs hold).")
@click.option("--order", default="tp-cp-ep-dp-pp", show_default=True, help="Rank order, as gpulayer-srun.")
@click.option(
    "--allreduce-bytes", required=True, metavar="B", help="Gradient bytes all-reduced per step (10G)."
)
@click.option("--tp-bytes", metavar="B", help="Bytes each TP group all-reduces per step.")
@click.option("--pp-bytes", metavar="B", help="Bytes one stage sends the next per step.")
@click.option(
    "--compute",
    metavar="SECONDS",
    help="Seconds a step computes (0.45, 450ms): the slowdown is of the whole step.",
)
@click.option(
    "--comm-share",
    metavar="F",
    help="Or: communication's share of the step on the best placement (0.3 or 30%).",
)
@click.option(
    "--overlap", metavar="F", help="Share of the compute DP's all-reduce runs behind (0-1; default 0)."
)
@click.option(
    "--comm-only", is_flag=True, help="Communication only: no compute assumed (the slowdown of the traffic)."
)
@click.option(
    "--links", "links_file", metavar="FILE", help="Link constants (a links: mapping) over the defaults."
)
@click.option("--json", "as_json", is_flag=True, help="One JSON object instead of text.")
def cost(
    inventories: tuple[str, ...],
    records_dir: str | None,
    nodelist: str,
    gpus_per_node: int | None,
    tp: int,
    pp: int,
    dp: int | None,
    order: str,
    allreduce_bytes: str,
    tp_bytes: str | None,
    pp_bytes: str | None,
    compute: str | None,
    comm_share: str | None,
    overlap: str | None,
    comm_only: bool,
    links_file: str | None,
    as_json: bool,
) -> None:
    """Predicted seconds per step of a plan on a placement (communication, and the step around it), against
    the best placement of the same shape on the idle fleet (slowdown = this step / the best's).

    Without --compute or --comm-share, communication is taken as the site default share of the best
    placement's step (25 %), and the output says so; --comm-only compares communication alone."""
    import dataclasses

    from .cost import DEFAULT_COMM_SHARE, Fabric, PlanSpec, parse_bytes, predict
    from .cost import gpus_per_node as resolve_gpus
    from .cost.model import parse_duration, parse_share
    from .hostlist import expand

    nodes = expand(nodelist)
    table = _links_table(inventories, links_file)
    fabric = Fabric.of(_load(inventories, records_dir=records_dir))
    spec = PlanSpec(
        tp=tp,
        pp=pp,
        dp=dp,
        gpus_per_node=resolve_gpus(fabric, nodes, gpus_per_node),
        allreduce_bytes=parse_bytes(allreduce_bytes, "--allreduce-bytes"),
        tp_bytes=parse_bytes(tp_bytes, "--tp-bytes") if tp_bytes is not None else None,
        pp_bytes=parse_bytes(pp_bytes, "--pp-bytes") if pp_bytes is not None else None,
        order=order,
        compute_s=parse_duration(compute, "--compute") if compute is not None else None,
        comm_share=parse_share(comm_share, "--comm-share", zero=False) if comm_share is not None else None,
        overlap=parse_share(overlap, "--overlap", zero=True) if overlap is not None else 0.0,
    )
    if compute is not None and comm_share is not None:
        raise InputError("give --compute or --comm-share, not both (one fixes the other)")
    if comm_only and (compute is not None or comm_share is not None):
        raise InputError("--comm-only leaves the compute out: not with --compute or --comm-share")
    prediction = predict(fabric, nodes, spec, table, default_share=None if comm_only else DEFAULT_COMM_SHARE)
    if as_json:
        doc = _cost_json(prediction, spec)
        doc["links_measured"] = dataclasses.asdict(table.measured) if table.measured else None
        click.echo(json.dumps(doc, indent=2))
    else:
        text = _cost_text(prediction, spec)
        click.echo(text + (f"{table.measured.text()}\n" if table.measured else ""), nl=False)


@cli.command()
@inventory_option
@records_option
@nodes_from_option
@scontrol_option
@click.option(
    "--shape", "shapes", multiple=True, required=True, metavar="NxG", help="N nodes × G GPUs; repeat."
)
@click.option("--json", "as_json", is_flag=True, help="One JSON object instead of the table.")
def capacity(
    inventories: tuple[str, ...],
    records_dir: str | None,
    nodes_from: str | None,
    scontrol: bool,
    shapes: tuple[str, ...],
    as_json: bool,
) -> None:
    """How many jobs of each shape could start now inside one group per level, against what the free GPUs
    alone suggest; the rest is stranded (fragmentation).

    --nodes-from: save `scontrol -d show node -o` (-d prints GresUsed, the GPUs a MIXED node has in use;
    without it such a node's GPUs count as not free unless AllocTRES accounts gres/gpu)."""
    from .capacity import capacity as count_capacity
    from .capacity import format_capacity, node_states, parse_shape

    parsed = [parse_shape(s) for s in shapes]
    records: list[dict[str, str]] | None
    if scontrol and not nodes_from:  # -d: GresUsed=gpu:…(IDX:…), the GPUs a MIXED node has in use
        argv = slurm_argv.show_nodes(detail=True)
        records = parse_scontrol_nodes(SubprocessRunner().run(argv), source="scontrol -d show node -o")
    else:
        records = _slurm_nodes(nodes_from, scontrol)
    if records is None:
        raise InputError("give --nodes-from FILE (`scontrol show node -o` output) or --scontrol")
    inventory = _load(inventories, records_dir=records_dir)
    states, extra = node_states(inventory, records)
    result = count_capacity(inventory, states, parsed, extra_nodes=extra)
    click.echo(json.dumps(result.as_dict(), indent=2) if as_json else format_capacity(result), nl=as_json)


# ----------------------------------------------------------------------------------------------------- health


@cli.command()
@click.option(
    "--node-name", metavar="NAME", help="Slurm node name (default $SLURMD_NODENAME, else hostname -s)."
)
@click.option("--nvml-from", metavar="FILE", help="NVML answers from a JSON file instead of the driver.")
@click.option("--no-nvml", is_flag=True, help="Do not ask NVML (ports only).")
@click.option(
    "--sysfs-root", default="/sys", show_default=True, metavar="DIR", help="Root laid out like /sys."
)
@click.option(
    "--state",
    "state_file",
    default="/var/lib/slurm-topo/health-state.json",
    show_default=True,
    metavar="FILE",
    help="Previous pass (counter deltas, hysteresis); replaced atomically.",
)
@click.option("--records", "records_dir", metavar="DIR", help="Also write DIR/health/<node>.json atomically.")
@click.option(
    "--threshold", "thresholds", multiple=True, metavar="KEY=VALUE", help="Override a limit; repeat."
)
@click.option("--json", "as_json", is_flag=True, help="The record as one JSON object.")
def health(
    node_name: str | None,
    nvml_from: str | None,
    no_nvml: bool,
    sysfs_root: str,
    state_file: str,
    records_dir: str | None,
    thresholds: tuple[str, ...],
    as_json: bool,
) -> None:
    """This node's GPU links (NVML) and InfiniBand/RoCE ports (sysfs): a verdict per link and port (ok,
    degraded, down) with reasons. Guide: docs/health.md."""
    import os
    import socket

    from .health import health_text, node_health, write_record
    from .health.verdict import parse_thresholds
    from .model import NODE_NAME_RE

    limits = parse_thresholds(thresholds)
    if records_dir and not Path(records_dir).is_dir():
        raise InputError(f"--records {records_dir}: not a directory")
    name = node_name or os.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".", 1)[0]
    if not NODE_NAME_RE.fullmatch(name):
        raise InputError(f"node name: must be 1-64 characters from [A-Za-z0-9._-] ({name[:80]!r})")
    record, warnings = node_health(
        name,
        nvml_from=Path(nvml_from) if nvml_from else None,
        use_nvml=not no_nvml,
        sysfs_root=Path(sysfs_root),
        state_file=Path(state_file) if state_file else None,
        thresholds=limits,
    )
    for line in warnings:
        _warn(f"warning: {line}")
    if records_dir:
        write_record(Path(records_dir), record)
    click.echo(json.dumps(record) if as_json else health_text(record), nl=as_json)


@cli.command("health-sync")
@click.option(
    "--records", "records_dir", required=True, metavar="DIR", help="The records folder (DIR/health/)."
)
@click.option(
    "--max-age", default=900.0, show_default=True, metavar="S", help="Ignore records older than S s."
)
@click.option("--dry-run", is_flag=True, help="Print the changes, make none.")
@click.option(
    "--json", "as_json", is_flag=True, help="One JSON object instead of text (README: JSON output)."
)
def health_sync(records_dir: str, max_age: float, dry_run: bool, as_json: bool) -> None:
    """Drain nodes whose health record has a hard fault; resume only the drains made here (reason
    'slurm-topo-health: ...'). At most one change per node per pass. Guide: docs/health.md."""
    from .health.drain import sync

    log: list[str] = []
    actions = []
    try:
        actions = sync(Path(records_dir), SubprocessRunner(), max_age=max_age, dry_run=dry_run, log=log)
    finally:
        if as_json:
            failed = {line.split(": ", 1)[0][len("failed ") :] for line in log if line.startswith("failed ")}
            doc = {
                "dry_run": dry_run,
                "actions": [
                    {
                        "node": a.node,
                        "action": a.verb,
                        "why": a.why,
                        "command": list(a.argv),
                        "failed": f"{a.verb} {a.node}" in failed,
                    }
                    for a in actions
                ],
                "log": log,
            }
            click.echo(json.dumps(doc, sort_keys=True))
        else:
            for line in log:
                click.echo(("(dry run) " if dry_run else "") + line)


@cli.command()
@click.option("--once", is_flag=True, help="One pass, then exit (the systemd timer's form).")
@click.option("--interval", default=60.0, show_default=True, metavar="S", help="Seconds between passes.")
@click.option("--dry-run", is_flag=True, help="Print the relaxations, make none.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per pass.")
@click.option("--lock", "lock_path", default="/run/slurm-topo/relax.lock", show_default=True, metavar="FILE")
@click.option(
    "--max-changes", default=200, show_default=True, metavar="N", help="Jobs changed a pass at most."
)
@click.option(
    "--load-aware/--plain-budget",
    default=True,
    show_default=True,
    help="Multiply budgets by 1/(1-busy share)^2, and hold them while the queue asks for every node "
    "(docs/relax.md).",
)
@click.option(
    "--estimates",
    default=0,
    show_default=True,
    type=click.IntRange(0, 1000),
    metavar="N",
    help="Also widen jobs whose sbatch --test-only start one level looser saves more than it costs: "
    "at most N --test-only calls a pass (0: off).",
)
@click.option(
    "--estimate-timeout",
    default=10.0,
    show_default=True,
    type=click.FloatRange(1, 120),
    metavar="S",
    help="Seconds for one sbatch --test-only call.",
)
@click.option(
    "--now",
    "now_epoch",
    type=click.FloatRange(0, 2**40),
    default=None,
    metavar="EPOCH",
    help="Judge waits as if it were this time (seconds since the epoch; default: the clock). For tests "
    "and what-if runs with --dry-run.",
)
@click.option("--verbose", "-v", is_flag=True, help="Also print how Slurm was read (the access backend).")
def relax(
    once: bool,
    interval: float,
    dry_run: bool,
    as_json: bool,
    lock_path: str,
    max_changes: int,
    load_aware: bool,
    estimates: int,
    estimate_timeout: float,
    now_epoch: float | None,
    verbose: bool,
) -> None:
    """Widen pending LEVEL:auto jobs one level once their wait passed the budget in their AdminComment
    (scontrol update Features=, the decision appended to AdminComment). Guide: docs/relax.md."""
    import time as _time

    from . import relax as rx

    while True:
        with rx.pass_lock(lock_path) as held:
            if not held:
                skipped = f"another pass holds {lock_path}; skipped"
                click.echo(json.dumps({"skipped": skipped}) if as_json else f"relax: {skipped}")
            else:
                try:
                    done = rx.run_pass(
                        SubprocessRunner(),
                        now=now_epoch,
                        dry_run=dry_run,
                        max_changes=max_changes,
                        load_aware=load_aware,
                        estimates=estimates,
                        estimate_timeout=estimate_timeout,
                        estimate_seconds=max(10.0, min(120.0, interval)),
                    )
                except CommandError as exc:
                    if once:
                        raise
                    click.echo(f"relax: pass failed, next in {interval:g} s: {exc}", err=True)
                else:
                    if as_json:
                        click.echo(rx.dumps(done))
                    else:
                        if verbose:
                            click.echo(
                                f"relax: jobs read with the {done.backend} backend (slurm_topo.access)"
                            )
                        for line in rx.log_lines(done, dry_run):
                            click.echo(("(dry run) " if dry_run else "") + line)
        if once:
            return
        _time.sleep(max(1.0, interval))


@cli.command()
@inventory_option
@click.option(
    "--nodes",
    "nodelist",
    metavar="HOSTLIST",
    help="Nodes to measure among (default: this allocation's, $SLURM_JOB_NODELIST).",
)
@click.option("--output", "-o", "output", metavar="FILE", help="Write the table here (default: stdout).")
@click.option("--probe", type=click.Choice(["tcp"]), default="tcp", show_default=True, help="The probe.")
@click.option("--bytes", "nbytes", default="64M", show_default=True, metavar="B", help="Bytes per transfer.")
@click.option(
    "--repeats", default=5, show_default=True, type=click.IntRange(1, 100), help="Transfers a pair."
)
@click.option("--port", default=47123, show_default=True, type=click.IntRange(1, 65535), help="Probe port.")
@click.option(
    "--probe-command",
    metavar="CMD",
    help="How compute nodes start slurm-topo (default: this Python with -m slurm_topo).",
)
@click.option("--srun-arg", "srun_args", multiple=True, metavar="ARG", help="Extra srun argument; repeat.")
@click.option(
    "--time", "time_limit", default=5, show_default=True, type=click.IntRange(1, 120), metavar="MIN"
)
@click.option(
    "--links", "links_file", metavar="FILE", help="The table to start from (default: inventories')."
)
@click.option("--json", "as_json", is_flag=True, help="One JSON object (table, measurements, notes).")
def calibrate(
    inventories: tuple[str, ...],
    nodelist: str | None,
    output: str | None,
    probe: str,
    nbytes: str,
    repeats: int,
    port: int,
    probe_command: str | None,
    srun_args: tuple[str, ...],
    time_limit: int,
    links_file: str | None,
    as_json: bool,
) -> None:
    """Measure each link level among the nodes (one pair per level, a probe step through srun) and write a
    links: table with the measured figures, the date, the probe and the pairs. Run it inside an
    allocation (salloc) or give --nodes. Guide: README "Calibrating the cost model"."""
    import os
    import shlex

    from .access import SlurmAccess
    from .cost import parse_bytes
    from .cost.calibrate import run_calibration
    from .hostlist import expand

    given = nodelist or os.environ.get("SLURM_JOB_NODELIST")
    if not given:
        raise click.UsageError("give --nodes HOSTLIST, or run inside an allocation (salloc)")
    nodes = expand(given)
    inventory = _load(inventories)
    base = _links_table(inventories, links_file)
    size = parse_bytes(nbytes, "--bytes")
    if not 1 <= size <= 1 << 36:
        raise InputError("--bytes: 1 byte to 64 GiB")
    command = shlex.split(probe_command) if probe_command else [sys.executable, "-m", "slurm_topo"]
    runner = SubprocessRunner()
    try:
        records = SlurmAccess(runner).nodes()
    except CommandError as exc:
        raise CommandError(exc.argv, exc.returncode, f"reading the nodes' addresses: {exc}") from None
    addresses = {name: rec.get("NodeAddr") or name for name, rec in records.items() if name in set(nodes)}
    done = run_calibration(
        inventory,
        nodes,
        runner,
        base=base,
        probe_command=command,
        addresses=addresses,
        port=port,
        nbytes=int(size),
        repeats=repeats,
        srun_args=srun_args,
        time_limit_min=time_limit,
    )
    if output:
        target = Path(output)
        write_files(target.parent if str(target.parent) else ".", {target.name: done.text})
    if as_json:
        click.echo(
            json.dumps(
                {
                    "links": done.table.as_dict(),
                    "measured": [
                        {
                            "level": m.pair.level,
                            "pair": [m.pair.a, m.pair.b],
                            "probe": m.probe,
                            "bandwidth": m.bandwidth,
                            "latency_us": m.latency_us,
                            **dict(m.detail),
                        }
                        for m in done.measured
                    ],
                    "notes": list(done.notes),
                    **({"output": output} if output else {}),
                },
                sort_keys=True,
            )
        )
        return
    if not output:
        click.echo(done.text, nl=False)
        return
    for m in done.measured:
        click.echo(f"{m.pair.level:<14} {m.pair.text():<28} {m.bandwidth:9.3f} GB/s {m.latency_us:10.1f} µs")
    for note in done.notes:
        click.echo(f"note: {note}")
    click.echo(f"wrote {output}")


@cli.group(hidden=True)
def probe() -> None:
    """The probes calibrate runs inside its srun steps."""


@probe.command("tcp")
@click.option("--port", required=True, type=click.IntRange(1, 65535))
@click.option("--address", "addresses", multiple=True, metavar="NODE=ADDR")
@click.option("--bytes", "nbytes", default=64 << 20, type=click.IntRange(1, 1 << 36))
@click.option("--repeats", default=5, type=click.IntRange(1, 100))
@click.option("--pings", default=200, type=click.IntRange(1, 100000))
@click.option("--bind", default="0.0.0.0", show_default=True)
@click.option("--timeout", default=120.0, type=click.FloatRange(1, 3600))
def probe_tcp(
    port: int, addresses: tuple[str, ...], nbytes: int, repeats: int, pings: int, bind: str, timeout: float
) -> None:
    """One task's side of the TCP probe (task 0 serves, task 1 measures and prints the result)."""
    import os

    from .probes import parse_addresses, tcp_task

    line = tcp_task(
        os.environ,
        port=port,
        addresses=parse_addresses(addresses),
        nbytes=nbytes,
        repeats=repeats,
        pings=pings,
        bind=bind,
        timeout=timeout,
    )
    click.echo(line)


@probe.command("ring")
@click.option("--port", required=True, type=click.IntRange(1, 65535))
@click.option("--address", "addresses", multiple=True, metavar="NODE=ADDR")
@click.option("--bytes", "nbytes", required=True, type=click.IntRange(1, 1 << 36))
@click.option("--repeats", default=3, type=click.IntRange(1, 100))
@click.option("--timeout", default=120.0, type=click.FloatRange(1, 3600))
def probe_ring(port: int, addresses: tuple[str, ...], nbytes: int, repeats: int, timeout: float) -> None:
    """One rank of a plain-Python ring all-reduce over TCP (one task per node; rank 0 prints the seconds)."""
    import os

    from .probes import parse_addresses
    from .probes.ring import ring_task

    click.echo(
        ring_task(
            os.environ,
            port=port,
            addresses=parse_addresses(addresses),
            nbytes=nbytes,
            repeats=repeats,
            timeout=timeout,
        )
    )


def main(argv: list[str] | None = None) -> None:
    """``slurm-topo``: every outcome leaves through ``run_entry`` (one stderr line, one exit-code table)."""
    run_entry(PROG, lambda: _invoke(argv))
