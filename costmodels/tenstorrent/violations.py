"""Reasons a Tensix mapping is infeasible, as messages a user can act on."""

from __future__ import annotations

from costmodels.family import KNOBS, RULE_CODES, ProblemRules
from costmodels.protocol import Choice, Violation
from costmodels.tenstorrent.cost import CODES as MAPPING_CODES
from costmodels.tenstorrent.cost import Evaluation
from costmodels.tenstorrent.hardware import FIDELITIES, TensixHardware
from costmodels.tenstorrent.shape import TTShape, cdiv, layout_stats, parse_layout

KIB = 1024
#: ttnn conv2d dtype / weights_dtype (tenstorrent-conv2d.md, Conv2dConfig), and tt-metal's block floats
#: (tt-metal's model code passes ``ttnn.Conv2dConfig(weights_dtype=ttnn.bfloat8_b)`` and bfloat8_b activations,
#: e.g. its YOLOv6l/YOLOv10 conv wrappers; bfloat4_b weights in its MoE experts); their tile bytes in
#: `workload.blockfloat`
SUPPORTED_DTYPES = ("bf16", "f32", "bfloat8_b", "bfloat4_b")

#: every code `supports` and `check` can return
CODES: tuple[str, ...] = (*RULE_CODES, KNOBS, *MAPPING_CODES)

#: problem-level reasons (`supports`)
RULES = ProblemRules(
    unary="the Tensix matrix unit multiplies two operands; a unary reduction is not modelled "
    "on this target: run it on another target (ascend-910b and ascend-a5 reduce rows on their vector cores, "
    "in f16 or f32: convert block-float inputs to one of those first)",
    reduce_op="reduce op {op} is not a matmul: the Tensix FPU only multiplies and adds",
    dtype="operand {name} is {dtype}; this model supports {allowed} inputs: convert it to bf16",
)


def _kib(b: float) -> str:
    return f"{b / KIB:.0f} KiB"


def l1_floor(shape: TTShape, hw: TensixHardware) -> str | None:
    """Why no mapping of the space fits L1, when a lower bound on every point's footprint proves it; else None.

    Every point keeps, per core, at least one 32-row output block of its output channel slice
    (sharded: the whole shard; DRAM: one block) and one K tile of weights for that slice (height:
    all of K), plus one activation tile. The slice is smallest with the output channels split over
    all cores (``width/C``, C = min(cores, N_t)): ``pn = ceil(N_t / C)`` tiles. So every footprint is
    at least ``32*32*sizeof(in) + 32*pn*32*(sizeof(out) + sizeof(w))``; the space has no N blocking
    within a core (ttnn conv2d keeps a core's whole weight block width), so nothing smaller exists.
    """
    t = shape.tile
    c = min(hw.cores, shape.n_t)
    pn = cdiv(shape.n_t, c)
    per_col = t * t * (shape.out_bytes + shape.w_bytes)  # one output and one weight column tile, 32 rows
    floor = t * t * shape.in_bytes + pn * per_col
    if floor <= hw.l1_free_bytes:
        return None
    fit_tiles = int((hw.l1_free_bytes - t * t * shape.in_bytes) // per_col)
    return (
        f"no mapping of this target's space fits L1: the space offers height, block and width sharding on every "
        f"core grid, L1-sharded or DRAM-streamed, with blocks down to 32 rows and one K tile, but even width/{c} "
        f"(the output channels over all {c} cores) leaves {pn} output channel tiles per core, and one 32-row "
        f"output block plus one weight tile row of them need {_kib(floor)} of the {_kib(hw.l1_free_bytes)} free "
        f"(tenstorrent-conv2d.md: a core computes its whole output channel slice per block): split the output "
        f"channels ({shape.cols} per batch) into smaller problems (this bound alone rules out more than "
        f"{max(fit_tiles, 0) * c * t}; partial-sum and double buffers need more)"
    )


#: codes whose test reads the layout's grid, shard or block fields: an unusable layout has placeholder fields, so
#: after a ``layout`` violation these say nothing true (a 10x13 grid on a 110-core part was also told its 65 channel
#: tiles sat on "1 core column") and are left out until the layout is fixed
LAYOUT_DERIVED = frozenset(
    {"channel-split", "act-block-h", "act-block-w-div", "dst-capacity", "subblock-divides", "subblock-shape",
     "l1-paper", "l1-capacity"}
)  # fmt: skip


def violations(shape: TTShape, hw: TensixHardware, point: dict[str, Choice], ev: Evaluation) -> list[Violation]:
    """One violation per failed constraint of the single point evaluated in `ev` (with an unusable layout, only the
    constraints that do not depend on it beside it: `LAYOUT_DERIVED`)."""
    a = {k: float(v[0]) for k, v in ev.a.items()}
    s = layout_stats(shape, hw, str(point["layout"]))
    out: list[Violation] = []
    bad_layout = not bool(ev.ok["layout"][0])
    no_subblock = a["sb_h"] != a["sb_h"]  # (NaN: out_subblock is not HxW; one reason says so, `_message`)
    for code in MAPPING_CODES:
        if bool(ev.ok[code][0]) or (bad_layout and code in LAYOUT_DERIVED):
            continue
        if no_subblock and code in ("subblock-divides", "subblock-shape"):
            continue
        out.append(Violation(code=code, message=_message(code, shape, hw, point, a, s.error)))
    return out


def _message(code: str, shape: TTShape, hw: TensixHardware, p: dict[str, Choice], a: dict[str, float], err: str) -> str:
    t = shape.tile
    lay = p["layout"]
    if code == "layout":
        return err or f"layout {lay!r} is not usable"
    dram = p.get("memory") == "dram-interleaved"
    if code == "memory":
        return f"memory {p.get('memory')!r} is unknown: use l1-sharded or dram-interleaved"
    if code == "channel-split" and dram:
        return (
            f"layout {lay} puts {int(a['c'])} core columns on {shape.n_t} output channel tiles: use at most "
            f"{shape.n_t} columns"
        )
    if code == "in0-block-w":
        return (
            f"in0_block_w={p.get('in0_block_w')} tiles must be a positive divisor of K = {int(a['k_t'])} tiles "
            f"(the K blocks streamed from DRAM): pick a divisor of {int(a['k_t'])}"
        )
    if code == "channel-split":
        return (
            f"layout {lay} splits {shape.n_t} output channel tiles over {int(a['c'])} core columns, leaving some "
            f"columns without a tile: use at most {shape.n_t} columns (input channels that the columns do not "
            f"divide are padded)"
        )
    width = (parse_layout(str(lay)) or ("",))[0] == "width"
    if code == "act-block-h" and shape.mm_conv and not width and not dram and float(str(p["act_block_h"])) % t == 0:
        return (
            f"act_block_h={p['act_block_h']}: a sharded 1x1 conv runs as a matmul over the core's whole M of "
            f"{int(a['pm_t']) * t} rows (tt-metal conv2d_utils.cpp determine_matmul_op_config_from_conv_op_config: "
            f"out_block_h = per_core_M): use act_block_h={int(a['pm_t']) * t}, or the DRAM-interleaved path"
        )
    if code == "act-block-h" and width and not dram and float(str(p["act_block_h"])) % t == 0:
        return (
            f"act_block_h={p['act_block_h']}: a width-sharded conv computes the whole per-core height of "
            f"{int(a['pm_t']) * t} rows in one block (ttnn ignores act_block_h under WIDTH_SHARDED, "
            f"tenstorrent-conv2d.md Conv2dConfig; a 1x1 conv runs as a matmul over the core's whole M): use "
            f"act_block_h={int(a['pm_t']) * t}, or height/block sharding for smaller blocks"
        )
    if code == "act-block-h":
        return (
            f"act_block_h={p['act_block_h']} must be a multiple of {t} that divides the per-core height of "
            f"{int(a['pm_t']) * t} rows (tenstorrent-conv2d.md: bHo mod 32 = 0): use a divisor of "
            f"{int(a['pm_t'])} tiles"
        )
    if code == "act-block-w-div":
        per_core = int(a["k_t"] * float(p["act_block_w_div"]) / a["kblocks"])
        return (
            f"act_block_w_div={p['act_block_w_div']} must be a positive divisor of the per-core act_block_w of "
            f"{per_core} tiles ({lay}): pick a divisor of {per_core}"
        )
    if code == "math-fidelity":
        allowed = ", ".join(hw.fidelities)
        if p["math_fidelity"] in FIDELITIES:
            return (
                f"math fidelity {p['math_fidelity']} is outside this target's fidelity policy (fidelities: "
                f"[{allowed}]; HiFi4 is ttnn's default and keeps bf16 products exact): use {allowed}, or "
                f"override the preset setting fidelities to allow {p['math_fidelity']}"
            )
        return f"math fidelity {p['math_fidelity']!r} is unknown: use one of the allowed fidelities, {allowed}"
    if code == "accumulation":
        return (
            "fp32_acc is off, so partial sums would accumulate in the 16-bit destination register, but the problem "
            "declares f32 accumulation: set fp32_acc, or override the preset setting bf16_accumulation to true to "
            "accept the precision loss"
        )
    if code in ("dst-capacity", "subblock-divides", "subblock-shape") and a["sb_h"] != a["sb_h"]:  # NaN: no HxW
        return (
            f"out_subblock {str(p['out_subblock'])[:40]!r} is not a sub-block HxW of positive tile counts: give "
            "one such as '1x4' (ttnn's sub-block sizes: hardware-facts.md §4.2 step 2)"
        )
    if code == "dst-capacity":
        acc = "with fp32 accumulation " if p["fp32_acc"] else ""
        return (
            f"output sub-block {p['out_subblock']} holds {int(a['sb_h'] * a['sb_w'])} tiles but the destination "
            f"register {acc}holds {int(a['dst'])}: use a sub-block of at most {int(a['dst'])} tiles"
        )
    if code == "subblock-divides":
        return (
            f"output sub-block {p['out_subblock']} must divide the block of {int(a['pm_t'] / a['nbh'])}x"
            f"{int(a['pn_t'])} tiles (act_block_h x per-core output channels): pick dividing sizes"
        )
    if code == "subblock-shape":
        return (
            f"output sub-block {p['out_subblock']}: a sub-block taller than 1 tile must span the whole per-core "
            f"width of {int(a['pn_t'])} tiles (ttnn rule): use height 1 or width {int(a['pn_t'])}"
        )
    if code in ("l1-paper", "l1-capacity"):
        floor = l1_floor(shape, hw)
        if floor is not None:
            return floor
    if code == "l1-paper":
        fix = (
            "lower act_block_h or in0_block_w"
            if dram
            else "lower act_block_h, split output channels over more cores (block/width sharding) or stream "
            "blocks from DRAM (memory=dram-interleaved)"
        )
        return (
            f"[bHo*bWo + K*(bHo + bWo)]*sizeof = {_kib(a['paper_bytes'])} is not below the "
            f"{_kib(hw.l1_free_bytes)} of free L1 (tenstorrent-conv2d.md, single-core constraint): {fix}"
        )
    parts = {
        "halo buffer" if shape.conv is not None else "input shard": a["halo_buf"],
        "activation CB": a["act_cb"],
        "weight CB": a["w_cb"],
        "output block" if dram else "output shard": a["out_shard"],
        "partials CB": a["interm"],
    }
    biggest = sorted(parts.items(), key=lambda kv: -kv[1])[:3]
    detail = ", ".join(f"{k} {_kib(v)}" for k, v in biggest)
    fix = (
        "use more cores, a smaller act_block_h or in0_block_w, or turn off double buffering"
        if dram
        else "use more cores, a smaller act_block_h, turn off double buffering, or stream blocks from DRAM "
        "(memory=dram-interleaved)"
    )
    return f"L1 needs {_kib(a['footprint'])} per core ({detail}), {_kib(hw.l1_free_bytes)} free: {fix}"
