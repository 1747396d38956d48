"""Render an RNGD `Mapping` in the reference's configuration-dump notation.

contraction-engine-rngd.txt, case studies::

    // Configuration: input_type = bf16, trf_type = bf16, reduce_op = `Add`
    //        Input mapping: [ H: [V=32, M=32, K=32] ] (1)
    //          TRF mapping: [ Row: [N=8] | H: [V=32, N/8=3, K=32] ] (1)
    //  Computation mapping: [ H: [V=32, M=32, N/8=3] | Row: [N=8] | T: [K=32] ] (1)
    // Accumulation mapping: [ H: [V=32, M=32, N/8=3] | T: [N=8] ] (1)

``A/p=f`` is the outer part of an axis split (stride p), ``W=30+2#`` a packet with 2 dummy
slots, ``1+1z`` a zero slot, ``$(W:2=15 + Fw=4)=32`` the shift-reuse input window.

A split axis whose loops run past its size (N over TRF chunks of whole row groups, an axis over
slices) shows its padding on its outermost loop, in the same ``real+dummy#`` form: ``N/8=3+1#``
(four chunks of 8 where N = 24 needs three) when the padding is whole outer steps, otherwise the
axis total after the loop, ``N/16=2(N=24+8#)`` (two chunks of 16, the second half padding).
"""

from __future__ import annotations

from costmodels.ir import Loop, Mapping
from costmodels.rngd.space import roles_of
from workload.problem import Problem

#: reference names of the conv2d axes ("$(H + Fh)$(W + Fw)K, FhFwKC -> HWC")
CONV_NAMES = {"n": "N", "oh": "H", "ow": "W", "fh": "Fh", "fw": "Fw", "g": "G", "ci": "K", "co": "C"}


def _name(problem: Problem, axis: str) -> str:
    if roles_of(problem).conv is not None:
        return CONV_NAMES.get(axis, axis.upper())
    return axis.upper() if len(axis) == 1 else axis


def _loop_text(problem: Problem, lp: Loop, *, pad: str = "#", slots: int = 0, axis_pad: int = 0) -> str:
    """``A=f``, ``A/p=f`` for an outer part, ``A=s+d#`` when the loop runs past the axis.

    ``axis_pad``: dummy points of the whole axis, given for the outermost loop of a split axis
    (module docstring).
    """
    a = _name(problem, lp.axis)
    size = problem.axes[lp.axis]
    stride = lp.stride or 1
    if stride > 1:
        if axis_pad <= 0:
            return f"{a}/{stride}={lp.factor}"
        if size % stride == 0 and axis_pad % stride == 0:
            return f"{a}/{stride}={size // stride}+{axis_pad // stride}{pad}"
        return f"{a}/{stride}={lp.factor}({a}={size}+{axis_pad}{pad})"
    real = min(lp.factor, size)
    dummy = max(lp.factor - size, 0) + max(slots - lp.factor, 0)
    return f"{a}={real}+{dummy}{pad}" if dummy else f"{a}={real}"


def _level(m: Mapping, name: str) -> tuple[Loop, ...]:
    return next(lvl.loops for lvl in m.levels if lvl.name == name)


def _fill_mark(m: Mapping, axis: str) -> str:
    return "z" if any(v.get(axis) == "zero" for v in m.fill.values()) else "#"


def _is_zero_slot(lp: Loop) -> bool:
    return lp.axis == "fw" and lp.spatial and (lp.stride or 1) > 1


def _packet(problem: Problem, m: Mapping, loops: tuple[Loop, ...]) -> list[str]:
    slots = int(m.knobs.get("packet_slots", 0))
    out: list[str] = []
    for lp in loops:
        if _is_zero_slot(lp):
            out.append(f"1+{lp.factor - 1}z")
        elif lp.axis == "ow" and slots:
            out.append(_loop_text(problem, lp, slots=slots))
        else:
            out.append(_loop_text(problem, lp, pad=_fill_mark(m, lp.axis)))
    return out


def _window(problem: Problem, m: Mapping, w_loop: Loop | None) -> str:
    """``$(W:s=w + Fw:d=f)=span`` of shift-reuse (conv case studies)."""
    conv = roles_of(problem).conv
    assert conv is not None
    sw, dw, fw = conv.stride[1], conv.dilation[1], conv.kernel[1]
    w = min(w_loop.factor, problem.axes["ow"]) if w_loop else 1
    zero = dw > 1 and sw > 1
    span = int(m.knobs["window"])
    st = f":{sw}" if sw > 1 else ""
    dt = f":{dw}" if dw > 1 else ""
    tail = f"={span - (sw - 1)}+{sw - 1}#" if zero else f"={span}"
    return f"$(W{st}={w} + Fw{dt}={fw}){tail}"


def _line(parts: list[tuple[str, list[str]]]) -> str:
    return "[ " + " | ".join(f"{k}: [{', '.join(v)}]" for k, v in parts if v or k == "H") + " ] (1)"


def render_mapping(problem: Problem, m: Mapping) -> str:
    """The five dump lines of a mapping (plus the sharding over clusters and slices when used)."""
    w_in = problem.weight if problem.weight is not None else 1
    mv_axes = set(problem.inputs[1 - w_in].axes)
    w_axes = set(problem.inputs[w_in].axes)
    free = set(problem.free_axes)
    shift = bool(m.knobs.get("shift"))
    h = _level(m, "slice") + _level(m, "time")
    row, pkt = _level(m, "row"), _level(m, "packet")
    outer = _padded_outer_loops(problem, m)
    text = lambda lp: _loop_text(  # noqa: E731
        problem, lp, pad=_fill_mark(m, lp.axis), axis_pad=outer.get(id(lp), 0)
    )
    # Input: H loops over the moving input's axes, then its packet (shift: the window)
    if shift:
        w_loop = next((lp for lp in pkt if lp.axis == "ow"), None)
        ins = [text(lp) for lp in h if lp.axis in mv_axes and lp.axis != "fw"] + [_window(problem, m, w_loop)]
    else:
        ins = [text(lp) for lp in h if lp.axis in mv_axes] + [text(lp) for lp in pkt if lp.axis in mv_axes]
    # TRF: rows, then the weight's loops (plus the packet, broadcast over M in N x M tiled)
    if shift:
        sizes = problem.axes
        trf = [f"K={sizes['ci']}", f"C={sizes['co']}", f"Fh={sizes['fh']}", f"Fw={m.padded_size('fw') // _zero(pkt)}"]
        trf += [f"1+{_zero(pkt) - 1}z"] if _zero(pkt) > 1 else []
    else:
        trf = [text(lp) for lp in h if lp.axis in w_axes] + _packet(problem, m, pkt)
    comp = [text(lp) for lp in h]
    # Accumulation: output loops; a free packet stays in T, otherwise the rows' outputs do
    pkt_free = [lp for lp in pkt if lp.axis in free]
    acc_h: list[str] = []
    merged = False
    for lp in h:
        if lp.axis not in free:
            continue
        if pkt_free and any(rl.axis == lp.axis for rl in row) and not merged:
            acc_h.append(f"{_name(problem, lp.axis)}={lp.factor * _row_factor(row, lp.axis)}")
            merged = True
        else:
            acc_h.append(text(lp))
    acc_t = _packet(problem, m, tuple(pkt_free)) if pkt_free else [text(lp) for lp in row]
    cfg = []
    if int(m.knobs.get("feed_flits", 2)) != 2:
        cfg.append(f"feed_flits = {m.knobs['feed_flits']}")
    cfg += [f"input_type = {m.knobs.get('input_type')}", f"trf_type = {m.knobs.get('trf_type')}", "reduce_op = `Add`"]
    lines = [
        "// Configuration: " + ", ".join(cfg),
        "//        Input mapping: " + _line([("H", ins)]),
        "//          TRF mapping: " + _line([("Row", [text(lp) for lp in row]), ("H", trf)]),
        "//  Computation mapping: "
        + _line([("H", comp), ("Row", [text(lp) for lp in row]), ("T", _packet(problem, m, pkt))]),
        "// Accumulation mapping: " + _line([("H", acc_h), ("T", acc_t)]),
    ]
    spread = [text(lp) for lvl in ("chip", "cluster") for lp in _level(m, lvl)]
    if spread:
        lines.append("//             Sharding: [ " + ", ".join(spread) + " ] over clusters, slices")
    return "\n".join(lines)


def _zero(pkt: tuple[Loop, ...]) -> int:
    return next((lp.factor for lp in pkt if _is_zero_slot(lp)), 1)


def _row_factor(row: tuple[Loop, ...], axis: str) -> int:
    return next((lp.factor for lp in row if lp.axis == axis), 1)


def _padded_outer_loops(problem: Problem, m: Mapping) -> dict[int, int]:
    """id of the outermost (largest-stride) loop of each split axis that runs past its size -> its dummy points.

    Zero slots (``1+1z``) are left to the packet notation, and so are axes they pad.
    """
    out: dict[int, int] = {}
    loops = [lp for lvl in m.levels for lp in lvl.loops]
    zero_axes = {lp.axis for lp in loops if _is_zero_slot(lp)}
    for axis, size in problem.axes.items():
        mine = [lp for lp in loops if lp.axis == axis]
        extra = m.padded_size(axis) - size
        if axis in zero_axes or extra <= 0 or len(mine) < 2:
            continue
        top = max(mine, key=lambda lp: lp.stride or 1)
        if (top.stride or 1) > 1:
            out[id(top)] = extra
    return out
