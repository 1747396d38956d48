"""A user's own network as the project sees it: its layers as problem specs, and what was left out.

Both ways in produce an `ImportedModel`: an ONNX file (`workload.onnx_import.import_onnx`) and a
layer-list file of problem specs in the README's request format (`workload.layer_list.load_layers`).
Its `problems()` are a list of labelled `Problem`s, the same kind of object a named workload
(`workload.named.load`) gives, so the workload tuning (`mapper.tune_layers`, the service's fan-out
of one job per distinct layer) takes it unchanged.
"""

from __future__ import annotations

from collections import Counter
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, computed_field

from workload.errors import ProblemError
from workload.problem import Problem
from workload.spec import Conv2dSpec, ProblemSpec

LayerSpec = ProblemSpec


class ImportedLayer(BaseModel):
    """One layer: the node it comes from and its problem in the request format (POST it back as it is)."""

    model_config = ConfigDict(frozen=True)
    index: int = Field(description="position among the imported layers")
    node: str = Field(description="the ONNX node's name (op_type_index when unnamed), or the layer's label")
    op_type: str = Field(description="ONNX operator (Conv, MatMul, Gemm, Einsum, ReduceSum, ...) or the spec's kind")
    problem: LayerSpec
    notes: list[str] = Field(default_factory=list, description="what the import changed or left out, and why")


class SkippedNode(BaseModel):
    """A node that is not a problem: an operator the project does not model, or one it could not import."""

    model_config = ConfigDict(frozen=True)
    node: str
    op_type: str
    reason: str


class ImportedModel(BaseModel):
    """The layers of a user's network and the nodes left out."""

    model_config = ConfigDict(frozen=True)
    name: str = Field(description="the network's name (the file's or the graph's)")
    source: Literal["onnx", "layers"]
    params: dict[str, int] = Field(default_factory=dict, description="dynamic dimensions given at import")
    layers: list[ImportedLayer]
    skipped: list[SkippedNode] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list, description="notes about the whole import")

    @computed_field  # type: ignore[prop-decorator]  # pydantic's documented use on a property
    @property
    def skipped_counts(self) -> dict[str, int]:
        """Skipped nodes per op_type, most frequent first."""
        return dict(Counter(s.op_type for s in self.skipped).most_common())

    def problems(self) -> list[Problem]:
        """The layers as problems labelled ``"<name>/<node>"`` (raises `ProblemError` when there is none)."""
        if not self.layers:
            kinds = ", ".join(f"{k} x{n}" for k, n in self.skipped_counts.items()) or "no nodes"
            raise ProblemError(
                f"{self.name} has no layer to tune (skipped: {kinds})",
                token=self.name,
                hint="a layer is a Conv, MatMul, Gemm, Einsum or Reduce{Sum,Max,Min,Prod,Mean} node, "
                "or a problem spec in a layer list",
            )
        return [layer.problem.to_problem() for layer in self.layers]

    def with_dtype(self, dtype: str) -> ImportedModel:
        """Every layer with its inputs in `dtype` (e.g. an f32 export run as bf16 or bfloat8_b).

        The output dtype goes back to the default, the accumulation type of the new inputs, and each
        layer's notes say what the model declared. An unknown dtype raises `ProblemError` when the
        layers are turned into problems, as for any spec."""
        layers = []
        for layer in self.layers:
            spec = layer.problem
            before = spec.dtype if isinstance(spec.dtype, str) else ", ".join(f"{k} {v}" for k, v in spec.dtype.items())
            update: dict[str, object] = {"dtype": dtype, "out_dtype": None}
            if isinstance(spec, Conv2dSpec):
                update["weights_dtype"] = None
            note = f"inputs run as {dtype} (the model declares {before})"
            layers.append(
                layer.model_copy(update={"problem": spec.model_copy(update=update), "notes": [*layer.notes, note]})
            )
        return self.model_copy(update={"layers": layers, "notes": [*self.notes, f"every layer's inputs as {dtype}"]})

    def summary(self) -> str:
        """One line: layers, distinct MACs and the skipped operators."""
        macs = sum(p.macs for p in self.problems()) if self.layers else 0
        skipped = ", ".join(f"{k} x{n}" for k, n in self.skipped_counts.items())
        return f"{self.name}: {len(self.layers)} layers, {macs / 1e9:.3f} GMAC" + (
            f"; skipped {skipped}" if skipped else ""
        )
