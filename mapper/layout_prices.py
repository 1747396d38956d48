"""What each step of a network plan costs from each state of its incoming edge and skip tensor.

A state is where a tensor is: ``-1`` for DRAM, else the index of an L1 layout in the plan's layout
vocabulary (`Prices.vocab`). For each step, `Prices.options` gives a table ``G`` of the step's
cheapest choice leading to each state of its outgoing edge, from each state it reads (the
incoming edge, the skip, or both for the add: see `mapper.layout_chain` for the modes), with the
choice's code; `Prices.detail` turns a chosen code back into the step's time, reshard and the
words of the report.

* A conv: choice ``(layout j, memory m, output o)`` from its `LayerTable`; from an L1 state in
  another layout, an L1-sharded conv reshards its input first (`tenstorrent.reshard`, NoC). A
  folded conv (`mapper.layout_chain.FoldedConv`) is priced from its folded conv's table plus the
  fold op, from DRAM only (its L1 sources are infinite: the fold runs DRAM to DRAM).
* A max pool: runs sharded in its input's layout (output kept in L1 or written to DRAM), or
  DRAM-interleaved (input from DRAM; an input kept in L1 spills, as a conv's does).
* An add: runs sharded in the layout of its chain operand or of the skip (the other operand is
  resharded over the NoC when its layout differs, read from DRAM when it is there), or
  DRAM-interleaved (operands kept in L1 spill). Priced by `tenstorrent.eltwise`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import numpy as np

from costmodels.protocol import Target
from costmodels.tenstorrent.eltwise import EltwiseOp, eltwise_cycles
from costmodels.tenstorrent.hardware import TensixHardware
from costmodels.tenstorrent.reshard import reshard_matrix
from costmodels.tenstorrent.shape import tt_shape
from mapper.layout_chain import Step
from mapper.layout_tables import MEMORY, LayerTable
from workload import dtypes
from workload.network_ops import NetworkOp
from workload.problem import Problem

INF = np.inf
#: an eltwise choice: where it runs (the chain operand's layout, the skip's, or DRAM-interleaved) x output
RUNS = ("in", "skip", "dram")


@dataclass(frozen=True)
class Detail:
    """A chosen step in words and numbers."""

    layout: str
    memory: str
    input: str
    output: str
    seconds: float
    reshard_seconds: float
    reshard_bytes: float
    alone_seconds: float
    fold_seconds: float = 0.0


def eltwise_op(op: NetworkOp) -> EltwiseOp:
    """The cost model's view of a pool or add step."""
    nbytes = float(dtypes.info(op.dtype).bytes)
    return EltwiseOp(op.kind, op.dims, op.out_dims, nbytes, op.kernel, op.stride, op.padding)


class Prices:
    """Step prices over one plan's layout vocabulary, with the reshard matrices and eltwise times memoised."""

    def __init__(self, steps: list[Step], tables: list[LayerTable | None], target: Target, live_per_core: list[int]):
        self.steps, self.tables = steps, tables
        self.hw = cast(TensixHardware, target.hardware)
        self.live = live_per_core
        vocab: dict[str, None] = {}
        for tb in tables:
            if tb is not None:
                vocab.update(dict.fromkeys(tb.layouts))
        self.vocab = list(vocab)
        self.index = {lay: i for i, lay in enumerate(self.vocab)}
        self._rs: dict[tuple[int, int, float], tuple[np.ndarray, np.ndarray]] = {}
        self._el: dict[tuple[object, ...], float] = {}

    # ---- shared pieces ------------------------------------------------------------------------------
    def reshard(self, sticks: int, channels: int, nbytes: float) -> tuple[np.ndarray, np.ndarray]:
        """(seconds, bytes) of resharding a tensor between every two layouts of the vocabulary."""
        key = (sticks, channels, nbytes)
        if key not in self._rs:
            cyc, moved = reshard_matrix(sticks, channels, nbytes, self.vocab, self.vocab, self.hw)
            self._rs[key] = (cyc / self.hw.clock_hz, moved)
        return self._rs[key]

    def eltwise(self, i: int, layout: int, in_dram: bool, skip_dram: bool, out_dram: bool, spill: float) -> float:
        """Seconds of eltwise step `i` run in vocabulary layout `layout` (-1: DRAM-interleaved), plus spilled bytes."""
        op = eltwise_op(cast(NetworkOp, self.steps[i].item))
        key = (op, layout, in_dram, skip_dram, out_dram, spill)
        if key not in self._el:
            lay = None if layout < 0 else self.vocab[layout]
            cyc = eltwise_cycles(op, lay, self.hw, in_dram=in_dram, skip_dram=skip_dram, out_dram=out_dram,
                                 live_bytes_per_core=self.live[i])  # fmt: skip
            cyc += spill / self.hw.dram_bytes_per_cycle  # a tensor kept in L1 written back to DRAM first
            self._el[key] = cyc / self.hw.clock_hz
        return self._el[key]

    def _tensor(self, i: int) -> tuple[int, int, float]:
        item = self.steps[i].item
        if isinstance(item, Problem):
            sh = tt_shape(item, self.hw.tile)
            return sh.in_sticks, sh.in_channels, sh.in_bytes
        op = eltwise_op(item)
        return op.in_sticks, op.channels, op.elem_bytes

    # ---- the DP's tables ------------------------------------------------------------------------------
    def conv_costs(self, i: int, src: np.ndarray) -> tuple[np.ndarray, list[tuple[int, int, int]]]:
        """``(len(src), C)`` seconds of conv step `i`'s choices ``(layout, memory, out)`` from each source state."""
        tb = self.tables[i]
        assert tb is not None
        nl = len(tb.layouts)
        choices = [(j, m, o) for j in range(nl) for m in (0, 1) for o in (0, 1) if not (m == 1 and o == 1)]
        cost = np.full((src.size, len(choices)), INF)
        l1 = src >= 0
        rs = np.zeros((int(l1.sum()), nl))
        if l1.any():
            sticks, ch, nb = self._tensor(i)
            loc = np.array([self.index[lay] for lay in tb.layouts])
            rs = self.reshard(sticks, ch, nb)[0][np.ix_(src[l1], loc)]
        cj, cm, co = (np.array(x) for x in zip(*choices, strict=True))
        for o in (0, 1) if self.steps[i].out_l1 else (0,):
            sel = np.flatnonzero(co == o)
            j, m = cj[sel], cm[sel]
            if (False, bool(o)) in tb.best:
                cost[np.ix_(~l1, sel)] = tb.best[(False, bool(o))][j, m][None, :]
            if l1.any() and (True, bool(o)) in tb.best:  # a sharded conv reshards an input in another layout
                cost[np.ix_(l1, sel)] = tb.best[(True, bool(o))][j, m][None, :] + np.where(m == 0, rs[:, j], 0.0)
        return cost + self.steps[i].fold_seconds, choices

    def options(self, i: int, E: np.ndarray, K: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(G, Gc, U): the cheapest cost and choice code per (source state, outgoing edge state ``U``).

        Sources: the incoming edge states `E` (modes keep, open), the skip states `K` (swap), or the
        pairs ``E x K`` (close: ``G`` is ``(len(E), len(K), len(U))``).
        """
        step = self.steps[i]
        if step.is_conv:
            src = K if step.mode == "swap" else E
            cost, choices = self.conv_costs(i, src)
            tb = self.tables[i]
            assert tb is not None
            ne = np.array([self.index[tb.layouts[j]] if o else -1 for j, _, o in choices])
            return _group(cost, ne)
        if step.mode == "close":
            return self._add_options(i, E, K)
        return self._pool_options(i, E)

    def _pool_options(self, i: int, E: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        out_ok = self.steps[i].out_l1
        n_in = float(np.prod(eltwise_op(cast(NetworkOp, self.steps[i].item)).dims))
        nbytes = n_in * eltwise_op(cast(NetworkOp, self.steps[i].item)).elem_bytes
        cost = np.full((E.size, 6), INF)  # code = run * 2 + o, run 0 (in its input's layout) or 2 (DRAM)
        ne = np.full((E.size, 6), -1)
        for s, e in enumerate(E):
            if e >= 0:
                cost[s, 0] = self.eltwise(i, int(e), False, False, True, 0.0)
                if out_ok:
                    cost[s, 1], ne[s, 1] = self.eltwise(i, int(e), False, False, False, 0.0), e
            cost[s, 4] = self.eltwise(i, -1, True, True, True, nbytes if e >= 0 else 0.0)
        return _group_per_source(cost, ne)

    def _add_options(self, i: int, E: np.ndarray, K: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        out_ok = self.steps[i].out_l1
        sticks, ch, nb = self._tensor(i)
        tensor = sticks * ch * nb
        rs = self.reshard(sticks, ch, nb)[0]
        el, kl = E >= 0, K >= 0
        ids = np.unique(np.concatenate([E[el], K[kl]]))
        # base[run][o][layout id]: run 0 in the chain operand's layout (skip in L1 or DRAM), run 1 in the skip's
        nv = len(self.vocab)
        base = np.full((3, 2, nv), INF)  # [(in L1, skip L1), (in L1, skip DRAM), (in DRAM, skip L1)], o
        for g in ids:
            for f, (in_dram, skip_dram) in enumerate(((False, False), (False, True), (True, False))):
                for o in (0, 1) if out_ok else (0,):
                    base[f, o, g] = self.eltwise(i, int(g), in_dram, skip_dram, not o, 0.0)
        e_, k_ = np.where(el, E, 0)[:, None], np.where(kl, K, 0)[None, :]
        el2, kl2 = el[:, None], kl[None, :]
        move_k = np.where(kl2 & (k_ != e_), rs[k_, e_], 0.0)  # the skip resharded to the chain operand's layout
        move_e = np.where(el2 & (e_ != k_), rs[e_, k_], 0.0)  # the chain operand resharded to the skip's
        run_in = [np.where(el2, base[np.where(kl2, 0, 1), o, e_] + move_k, INF) for o in (0, 1)]
        run_skip = [np.where(kl2, base[np.where(el2, 0, 2), o, k_] + move_e, INF) for o in (0, 1)]
        spill = el2.astype(int) + kl2  # operands kept in L1 that a DRAM-interleaved add writes back first
        il = np.array([self.eltwise(i, -1, True, True, True, tensor * n) for n in range(3)])[spill.astype(int)]
        u = np.concatenate([[-1], ids]) if out_ok else np.array([-1])
        G = np.full((E.size, K.size, u.size), INF)
        Gc = np.zeros((E.size, K.size, u.size), dtype=np.int64)
        dram = np.stack([run_in[0], run_skip[0], il])  # codes 0, 2, 4: the first cheapest wins ties
        arg = np.argmin(dram, axis=0)
        G[:, :, 0], Gc[:, :, 0] = np.take_along_axis(dram, arg[None], axis=0)[0], 2 * arg
        if out_ok:
            a, b = np.indices((E.size, K.size))
            col_e = np.searchsorted(u, np.broadcast_to(e_, a.shape))
            col_k = np.searchsorted(u, np.broadcast_to(k_, a.shape))
            ok = np.broadcast_to(el2, a.shape)
            G[a[ok], b[ok], col_e[ok]], Gc[a[ok], b[ok], col_e[ok]] = run_in[1][ok], 1
            ok = np.broadcast_to(kl2, a.shape)
            cur = G[a[ok], b[ok], col_k[ok]]
            better = run_skip[1][ok] < cur
            G[a[ok][better], b[ok][better], col_k[ok][better]] = run_skip[1][ok][better]
            Gc[a[ok][better], b[ok][better], col_k[ok][better]] = 3
        return G, Gc, u

    # ---- the report ---------------------------------------------------------------------------------
    def detail(self, i: int, e: int, k: int, code: int) -> Detail:
        """The chosen step `i` from edge state `e` and skip state `k` with choice `code`."""
        step = self.steps[i]
        if step.is_conv:
            tb = self.tables[i]
            assert tb is not None
            src = k if step.mode == "swap" else e
            cost, choices = self.conv_costs(i, np.array([src]))
            j, m, o = choices[code]
            rs_s = rs_b = 0.0
            if src >= 0 and m == 0:
                sticks, ch, nb = self._tensor(i)
                r = self.reshard(sticks, ch, nb)
                at = (src, self.index[tb.layouts[j]])
                rs_s, rs_b = float(r[0][at]), float(r[1][at])
            name = self.vocab[src] if src >= 0 else ""
            inp = "dram" if src < 0 else ("l1 -> dram" if m == 1 else "l1" if rs_s == 0 else f"l1 from {name}")
            if step.mode == "swap":
                inp = f"skip {inp}"
            if step.fold is not None:
                inp = f"{inp}, folded"
            fold = step.fold_seconds
            return Detail(tb.layouts[j], MEMORY[m], inp, "l1" if o else "dram", float(cost[0, code]), rs_s, rs_b,
                          float(tb.best[(False, False)].min()) + fold, fold)  # fmt: skip
        run, o = divmod(code, 2)
        lay = -1 if RUNS[run] == "dram" else (e if RUNS[run] == "in" else k)
        if step.mode == "close":
            g, gc, _ = self._add_options(i, np.array([e]), np.array([k]))
        else:
            g, gc, _ = self._pool_options(i, np.array([e]))
        seconds = float(g.reshape(-1)[list(gc.reshape(-1)).index(code)])
        rs_s = rs_b = 0.0
        other = k if RUNS[run] == "in" else e
        if step.mode == "close" and lay >= 0 and other >= 0 and other != lay:
            sticks, ch, nb = self._tensor(i)
            r = self.reshard(sticks, ch, nb)
            rs_s, rs_b = float(r[0][other, lay]), float(r[1][other, lay])
        inp = "dram" if e < 0 else "l1"
        if step.mode == "close":
            inp = f"{inp} + skip {'dram' if k < 0 else 'l1'}" + (f" from {self.vocab[other]}" if rs_s > 0 else "")
        alone = self.eltwise(i, -1, True, True, True, 0.0)
        layout = self.vocab[lay] if lay >= 0 else "interleaved"
        return Detail(layout, MEMORY[0 if lay >= 0 else 1], inp, "l1" if o else "dram", seconds, rs_s, rs_b, alone)


def _group(cost: np.ndarray, ne: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per source row, the cheapest choice leading to each outgoing state (choices' states `ne` shared by rows)."""
    u = np.unique(ne)
    g = np.full((cost.shape[0], u.size), INF)
    gc = np.zeros((cost.shape[0], u.size), dtype=np.int64)
    for a, v in enumerate(u):
        idx = np.flatnonzero(ne == v)
        sub = cost[:, idx]
        arg = np.argmin(sub, axis=1)
        g[:, a] = sub[np.arange(sub.shape[0]), arg]
        gc[:, a] = idx[arg]
    return g, gc, u


def _group_per_source(cost: np.ndarray, ne: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """As `_group`, each row with its own choices' outgoing states (eltwise steps keep their input's layout)."""
    finite = np.isfinite(cost)
    ne = np.where(finite, ne, -1)
    u = np.unique(ne)
    g = np.full((cost.shape[0], u.size), INF)
    gc = np.zeros((cost.shape[0], u.size), dtype=np.int64)
    pos = np.searchsorted(u, ne)
    for c in range(cost.shape[1]):  # ascending code: the first cheapest wins ties
        better = finite[:, c] & (cost[:, c] < g[np.arange(cost.shape[0]), pos[:, c]])
        rows = np.flatnonzero(better)
        g[rows, pos[rows, c]] = cost[rows, c]
        gc[rows, pos[rows, c]] = c
    return g, gc, u
