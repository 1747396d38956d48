"""Reasons a Tensix mapping is infeasible, as messages a user can act on."""

from __future__ import annotations

from costmodels.protocol import Choice, Violation
from costmodels.tt_eval import CODES, Evaluation
from costmodels.tt_hardware import TensixHardware
from costmodels.tt_shape import TTShape, layout_stats

KIB = 1024


def _kib(b: float) -> str:
    return f"{b / KIB:.0f} KiB"


def violations(shape: TTShape, hw: TensixHardware, point: dict[str, Choice], ev: Evaluation) -> list[Violation]:
    """One violation per failed constraint of the single point evaluated in `ev`."""
    a = {k: float(v[0]) for k, v in ev.a.items()}
    s = layout_stats(shape, hw, str(point["layout"]))
    out: list[Violation] = []
    for code in CODES:
        if bool(ev.ok[code][0]):
            continue
        out.append(Violation(code=code, message=_message(code, shape, hw, point, a, s.error)))
    return out


def _message(code: str, shape: TTShape, hw: TensixHardware, p: dict[str, Choice], a: dict[str, float], err: str) -> str:
    t = shape.tile
    lay = p["layout"]
    if code == "layout":
        return err or f"layout {lay!r} is not usable"
    if code == "channel-split":
        return (
            f"layout {lay} splits {shape.k_channels} input channels and {shape.n_t} output channel tiles over "
            f"{int(a['c'])} core columns: pick a column count that divides the input channels and is at most "
            f"the output channel tiles"
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
        return f"math fidelity {p['math_fidelity']!r} is unknown: use LoFi, HiFi2, HiFi3 or HiFi4"
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
    if code == "l1-paper":
        return (
            f"[bHo*bWo + Kh*Kw*Ci*(bHo + bWo)]*sizeof = {_kib(a['paper_bytes'])} is not below the "
            f"{_kib(hw.l1_free_bytes)} of free L1 (tenstorrent-conv2d.md, single-core constraint): "
            f"lower act_block_h or split output channels over more cores (block/width sharding)"
        )
    parts = {
        "halo buffer": a["halo_buf"],
        "activation CB": a["act_cb"],
        "weight CB": a["w_cb"],
        "output shard": a["out_shard"],
        "partials CB": a["interm"],
    }
    biggest = sorted(parts.items(), key=lambda kv: -kv[1])[:3]
    detail = ", ".join(f"{k} {_kib(v)}" for k, v in biggest)
    return (
        f"L1 needs {_kib(a['footprint'])} per core ({detail}), {_kib(hw.l1_free_bytes)} free: use more cores, "
        f"a smaller act_block_h, or turn off double buffering"
    )
