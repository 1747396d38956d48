"""What a network plan reports: one row per step (conv, max pool, add) and the totals beside layer by layer."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from costmodels.protocol import Choice
from mapper.layout_chain import Step
from mapper.layout_prices import Detail, Prices
from mapper.layout_tables import LayerTable
from workload.network_ops import NetworkOp

RULE = (
    "exact DP over the step chain (convs, the max pool and the residual adds put back between them), the state "
    "being where the chain edge and the block's skip tensor are (DRAM, or L1 in a layout); DRAM where a step's input "
    "is not its predecessor's output; residual tensors counted as live L1 bytes; each strided conv in the form the "
    "search chooses alone (folded or as given, mapper.layout_forms), a folded conv reading its input from DRAM with "
    "the fold op in its price (mapper.layout_plan)"
)


class PlannedLayer(BaseModel):
    """One step of the joint plan: a conv layer, or a max pool / residual add between them."""

    model_config = ConfigDict(frozen=True)
    index: int
    label: str
    kind: str = Field(default="conv", description="conv, maxpool or add")
    form: str = Field(
        default="",
        description="a strided conv the fold is offered for: 'as given' or 'folded' (the folded conv's mapping, "
        "the fold op in its seconds); empty otherwise",
    )
    fold_seconds: float = Field(default=0.0, description="the fold op, included in seconds and alone_seconds")
    layout: str = Field(description="the sharding layout it runs in ('interleaved': DRAM-interleaved eltwise)")
    memory: str
    input: str = Field(description="dram, l1 (same layout) or 'l1 from <layout>' (resharded); the add names its skip")
    output: str = Field(description="dram or l1")
    seconds: float = Field(description="the step's time in the plan, its reshard included")
    reshard_seconds: float
    reshard_bytes: float
    alone_seconds: float = Field(description="the step's optimum alone (input and output in DRAM)")
    live_bytes_per_core: int
    point: dict[str, Choice] = Field(default_factory=dict, description="the conv's mapping (empty for other steps)")


class NetworkPlan(BaseModel):
    """The joint layout choice of a workload on a Tenstorrent target, beside layer-by-layer choices."""

    model_config = ConfigDict(frozen=True)
    layers: list[PlannedLayer]
    total_seconds: float = Field(description="joint optimum: every step, its reshards and spills")
    layer_by_layer_seconds: float = Field(description="each step's optimum alone, input and output in DRAM")
    greedy_seconds: float = Field(
        description="step by step with activations kept in L1: each step takes its cheapest choice given the "
        "state it finds (as ttnn's auto-shard picks per layer)"
    )
    reshards: int
    reshard_seconds: float
    spilled_edges: int = Field(
        description="chain edges (and skip tensors) that could stay in L1 but go through DRAM in the joint plan "
        "(the edge into a folded conv always does, and is not counted)"
    )
    rule: str = Field(description="what the plan models and assumes (see mapper.layout_plan)")

    def conv_seconds(self) -> float:
        """The joint plan's time in the convs alone (a folded conv's fold op included)."""
        return sum(lay.seconds for lay in self.layers if lay.kind == "conv")

    def folded(self) -> list[str]:
        """The labels of the convs the plan runs folded."""
        return [lay.label for lay in self.layers if lay.form == "folded"]


def report(
    steps: list[Step],
    tables: list[LayerTable | None],
    prices: Prices,
    chosen: list[tuple[int, int, int]],
    total: float,
    greedy: float,
) -> NetworkPlan:
    """The plan of the chosen (edge state, skip state, choice code) per step."""
    layers = []
    n_reshard, t_reshard, spilled = 0, 0.0, 0
    for i, (e, k, code) in enumerate(chosen):
        d: Detail = prices.detail(i, e, k, code)
        step = steps[i]
        if d.reshard_seconds > 0:
            n_reshard += 1
            t_reshard += d.reshard_seconds
        nxt = steps[i + 1] if i + 1 < len(steps) else None
        if nxt is not None and nxt.in_l1 and d.output == "dram":
            spilled += 1
        point: dict[str, Choice] = {}
        tb = tables[i]
        if tb is not None:
            combo = ((k if step.mode == "swap" else e) >= 0, d.output == "l1")
            point = tb.points[combo][(tb.layouts.index(d.layout), ("l1-sharded", "dram-interleaved").index(d.memory))]
        layers.append(
            PlannedLayer(
                index=i,
                label=step.label or f"layer {i}",
                kind=step.item.kind if isinstance(step.item, NetworkOp) else "conv",
                form=step.form,
                fold_seconds=d.fold_seconds,
                layout=d.layout,
                memory=d.memory,
                input=d.input,
                output=d.output,
                seconds=d.seconds,
                reshard_seconds=d.reshard_seconds,
                reshard_bytes=d.reshard_bytes,
                alone_seconds=d.alone_seconds,
                live_bytes_per_core=prices.live[i],
                point=point,
            )
        )
    return NetworkPlan(
        layers=layers,
        total_seconds=total,
        layer_by_layer_seconds=sum(lay.alone_seconds for lay in layers),
        greedy_seconds=greedy,
        reshards=n_reshard,
        reshard_seconds=t_reshard,
        spilled_edges=spilled,
        rule=RULE,
    )
