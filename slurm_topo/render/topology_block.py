"""NVLink domains as Slurm blocks: which topology file a release gets, ``BlockSizes``, and topology.conf in
``topology/block`` syntax (topology.conf(5) ``BlockName= Nodes=``).

* no node has an ``nvlink_domain`` (or ``nvlink: {topology: tree}``): the network tree in topology.conf, as
  ever; domains are only node features (``nvl_<domain>``, written on every release);
* 23.11 to 24.11 (one topology per cluster): topology.conf holds the blocks, with ``BlockLevels=0-L`` on 23.11
  and ``BlockSizes=`` from 24.05; every node must then have a domain (a node in no block is outside the
  topology: only a constraint or partition that names it reaches it, and no block placement ever does). A
  block shorter than the base block size is fatal to 24.x: from 24.05 a partly filled rack, and a domain
  with no node, are padded to the base size with ``State=FUTURE`` placeholder nodes
  (:func:`placeholders`, named ``<block>-future<k>``), which slurmctld never allocates: the rack keeps its
  full-size semantics (``-N36 --segment=18`` over two 18-node blocks, checked on 24.11.5);
* 25.05 and later: topology.yaml holds the tree (``cluster_default``) and the blocks
  (``render.topology_yaml``).

Block lines are written in ``topology.Topology.blocks`` order: aggregated blocks are runs of consecutive base
blocks, so the order is part of the meaning and never depends on which racks happen to be filled.
"""

from __future__ import annotations

from ..core.topology import Block
from ..plumbing.version import format_slurm_version
from . import RenderContext, header, refusal

BLOCK_SINCE = (23, 11)
"""topology/block ships in 23.11 (``BlockLevels=``)."""
BLOCK_SIZES_SINCE = (24, 5)
"""24.05 replaced ``BlockLevels`` by ``BlockSizes``."""
YAML_SINCE = (25, 5)
"""topology.yaml (several topologies, partition ``Topology=``)."""
SHORT_BLOCKS_SINCE = (25, 5)
"""From 25.05 a block may hold fewer nodes than the base block size (an empty placeholder included). 24.11
refuses both, fatally: "block X hasn't got nodes", "Block configuration (X) children count lower than
bblock_node_cnt" (checked on 24.11.5)."""
PAD_SINCE = BLOCK_SIZES_SINCE
"""From 24.05 (``BlockSizes``) to 25.05 short blocks are padded with State=FUTURE placeholders."""
PAD_MARK = "-future"
"""A placeholder is named ``<block name>-future<k>``: never a host, and never mistaken for one."""
MAX_BLOCK_LEVELS = 16
"""23.11's ``BlockLevels`` go from 0 to 15 (a level-L block is 2**L base blocks)."""

TREE, BLOCK_CONF, YAML = "tree", "block", "yaml"


def topology_mode(ctx: RenderContext) -> str:
    """``tree``, ``block`` (topology.conf blocks) or ``yaml`` for this inventory and release; raises
    ``InputError`` where the inventory asks for what the release cannot do."""
    blocks = ctx.topology.blocks
    wanted = ctx.inventory.nvlink.topology if ctx.inventory.nvlink is not None else "auto"
    version = format_slurm_version(ctx.slurm_version)
    if wanted == "tree" or (not blocks and wanted == "auto"):
        return TREE
    if not blocks:
        raise refusal(
            ctx.inventory,
            "block, but no node has an nvlink_domain",
            section="nvlink",
            where="nvlink.topology",
        )
    if ctx.slurm_version < BLOCK_SINCE:
        if wanted == "block":
            raise refusal(
                ctx.inventory,
                f"block needs Slurm 23.11 or later (rendering for {version}); the nvl_ node features keep "
                "jobs in one domain there (--constraint='[nvl_a|nvl_b]')",
                section="nvlink",
                where="nvlink.topology",
            )
        return TREE
    if ctx.slurm_version >= YAML_SINCE:
        return YAML
    lacking = [n.name for n in ctx.inventory.nodes if n.nvlink_domain is None]
    missing = lacking + list(ctx.inventory.extra_nodes)
    if missing:
        shown = ", ".join(missing[:3]) + (", ..." if len(missing) > 3 else "")
        raise refusal(
            ctx.inventory,
            f"Slurm {version} has one topology per cluster and {len(missing)} node(s) have no "
            f"nvlink_domain ({shown}): a node in no block gets no block placement (only a job naming it "
            "by constraint or partition lands there). Give them a domain, set "
            "nvlink: {topology: tree} to keep the network tree (domains as nvl_ features only), or render "
            "for Slurm 25.05+ (topology.yaml holds both)",
            # the first node without a domain; only nodes no inventory places (Slurm's): the file whose
            # domains made this a block fleet
            node=lacking[0] if lacking else None,
            file_of=None if lacking else next(n.name for n in ctx.inventory.nodes if n.nvlink_domain),
        )
    return BLOCK_CONF


def padded(version: tuple[int, int]) -> bool:
    """Whether this release's short blocks are padded with FUTURE placeholders (24.05 to 25.05)."""
    return PAD_SINCE <= version < SHORT_BLOCKS_SINCE


def release_blocks(ctx: RenderContext) -> tuple[Block, ...]:
    """The blocks this release can hold: all of them from 24.05 (25.05+ natively, 24.x padded with
    placeholders); on 23.11 only those with nodes (an empty placeholder is fatal there, so a missing domain
    shifts the aggregates after it; ``lint --previous`` reports such a shift)."""
    blocks = ctx.topology.blocks
    if ctx.slurm_version >= PAD_SINCE:
        return blocks
    return tuple(b for b in blocks if b.nodes)


def placeholders(ctx: RenderContext) -> dict[str, tuple[str, ...]]:
    """Block name -> the State=FUTURE nodes that fill it up to the base block size (24.05 to 25.05, block
    topology only; else empty). Raises ``InputError`` when a placeholder's name is an inventory node's."""
    if not padded(ctx.slurm_version) or topology_mode(ctx) != BLOCK_CONF:
        return {}
    base = block_sizes(ctx)[0]
    out: dict[str, tuple[str, ...]] = {}
    for b in release_blocks(ctx):
        if len(b.nodes) < base:
            out[b.name] = tuple(f"{b.name}{PAD_MARK}{k}" for k in range(1, base - len(b.nodes) + 1))
    names = {n.name for n in ctx.inventory.nodes} | set(ctx.inventory.extra_nodes)
    clash = sorted(n for pads in out.values() for n in pads if n in names)
    if clash:
        raise refusal(
            ctx.inventory,
            f"node {clash[0]} is named like a placeholder slurm-topo pads short NVLink blocks with "
            f"(<block>{PAD_MARK}<k>): rename it",
            node=clash[0],
        )
    return out


def _power_of_two(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def block_sizes_problem(
    sizes: tuple[int, ...],
    blocks: tuple[Block, ...],
    slurm_version: tuple[int, int],
    *,
    given: bool = False,
) -> str | None:
    """Why ``sizes`` is not a valid ``BlockSizes`` for these blocks on this release, else None.

    topology.conf(5): each size after the first is a power of two times the one before (26.05 makes any other
    value fatal); an aggregate larger than all blocks together can never be formed. The base block holds the
    largest domain, except for sizes an administrator ``given`` on 24.x, which accepts blocks longer than
    the base (only shorter ones are fatal, checked on 24.11.5). Shorter blocks: padded on 24.x
    (:func:`placeholders`), fatal on 23.11, allowed from 25.05."""
    return _block_sizes_problem(sizes, blocks, slurm_version, given)[0]


def _block_sizes_problem(
    sizes: tuple[int, ...], blocks: tuple[Block, ...], slurm_version: tuple[int, int], given: bool
) -> tuple[str | None, Block | None]:
    """:func:`block_sizes_problem`, and the block it is about where it is one domain's."""
    if not sizes:
        return "is empty", None
    if any(s < 1 for s in sizes):
        return "sizes must be positive", None
    for prev, size in zip(sizes, sizes[1:], strict=False):
        if size <= prev or size % prev or not _power_of_two(size // prev):
            return (
                f"{size} is not a power of two times {prev} (each size doubles the one before, or more)",
                None,
            )
    largest = max((len(b.nodes) for b in blocks), default=0)
    base = sizes[0]
    if largest > base and not (given and padded(slurm_version)):
        big = next(b for b in blocks if len(b.nodes) == largest)
        return f"the base size {base} is smaller than domain {big.domain} ({largest} nodes)", big
    if slurm_version < PAD_SINCE:
        short = [b for b in blocks if len(b.nodes) != base]
        if short:
            return (
                f"domain {short[0].domain} has {len(short[0].nodes)} nodes, not {base}: on Slurm 23.11 every "
                "block holds exactly the base block size (Slurm stops on another; 24.05+ pads short ones)"
            ), short[0]
    if sizes[-1] > base * len(blocks):
        return f"{sizes[-1]} nodes is more than all {len(blocks)} blocks of {base} hold", None
    return None, None


def block_sizes(ctx: RenderContext) -> tuple[int, ...]:
    """The inventory's ``nvlink.block_sizes`` (validated), else: the largest domain's node count, then every
    doubling that the block slots can hold (``18, 36, 72`` for four 18-node racks)."""
    blocks = release_blocks(ctx)
    given = ctx.inventory.nvlink.block_sizes if ctx.inventory.nvlink is not None else ()
    if given:
        sizes = given
    else:
        base = max(len(b.nodes) for b in blocks)
        sizes = tuple(base << k for k in range(MAX_BLOCK_LEVELS) if 1 << k <= len(blocks))
    problem, block = _block_sizes_problem(sizes, blocks, ctx.slurm_version, bool(given))
    if problem is not None:
        why = (
            f"BlockSizes={','.join(map(str, sizes))} is not valid for Slurm "
            f"{format_slurm_version(ctx.slurm_version)}: {problem}"
        )
        if given:  # the sizes the nvlink section gives
            raise refusal(ctx.inventory, why, section="nvlink", where="nvlink.block_sizes")
        # derived from the domains: the entry of the domain's first node (a domain only nvlink.domains
        # names has none: that list)
        first = block.nodes[0] if block is not None and block.nodes else None
        raise refusal(
            ctx.inventory, f"the NVLink domains: {why}", node=first, section="nvlink", where="nvlink.domains"
        )
    return sizes


def block_levels(sizes: tuple[int, ...]) -> str:
    """23.11's ``BlockLevels=`` for the same aggregates: level L is 2**L base blocks."""
    levels = [(s // sizes[0]).bit_length() - 1 for s in sizes]
    return ",".join(str(level) for level in levels)


def render_block_conf(ctx: RenderContext) -> str:
    """topology.conf for ``TopologyPlugin=topology/block``."""
    blocks = release_blocks(ctx)
    sizes = block_sizes(ctx)
    summary = (
        f"topology/block: {len(blocks)} NVLink domain blocks in a fixed order (aggregated blocks are "
        "consecutive lines); TopologyPlugin=topology/block"
    )
    pads = placeholders(ctx)
    if pads:
        summary += (
            f"; {sum(map(len, pads.values()))} State=FUTURE placeholders (<block>{PAD_MARK}<k>, in "
            "slurm-topo-nodes.conf) fill short blocks to the base size"
        )
    out = [header("topology.conf", ctx, summary)]
    from ..core import hostlist

    for b in blocks:
        names = b.nodes + pads.get(b.name, ())
        out.append(
            f"BlockName={b.name} Nodes={hostlist.compress(names)}\n" if names else f"BlockName={b.name}\n"
        )
    if ctx.slurm_version < BLOCK_SIZES_SINCE:
        out.append(f"BlockLevels={block_levels(sizes)}\n")
    else:
        out.append(f"BlockSizes={','.join(map(str, sizes))}\n")
    return "".join(out)
