"""Problems, targets and overrides from the command line and from problem files (bounded, never a traceback)."""

from __future__ import annotations

import re
import types
import typing
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from app.cli.common import MAX_FILE_BYTES, MAX_NESTING, UsageError

if typing.TYPE_CHECKING:
    from workload.imported import ImportedModel

CONV_KEYS = {
    "batch": "batch",
    "n": "batch",
    "in": "in_channels",
    "out": "out_channels",
    "h": "input_height",
    "w": "input_width",
    "k": "kernel",
    "s": "stride",
    "p": "padding",
    "d": "dilation",
    "g": "groups",
}
CONV_KEYS |= {v: v for v in set(CONV_KEYS.values())}  # the spec's own names too: in_channels=64, groups=32, ...
CONV_KEYS["kernel_size"] = "kernel"  # (PyTorch's and ttnn's name)
#: the keys that take a pair, written ``HxW`` (``k=3x1``): one value is both sides
CONV_PAIRS = {"kernel", "stride", "padding", "dilation"}


#: the longest value an error message repeats whole (a longer one is cut, with its length)
MAX_ECHO = 40
#: an integer as a user types one: ASCII digits, an optional sign (no ``1_000``, no other scripts' digits)
INT_TEXT = re.compile(r"[+-]?[0-9]+")
#: the CONV_KEYS fields that must be given (the others have the spec's defaults), with an example
CONV_REQUIRED = {"in_channels": "in=64", "out_channels": "out=64", "input_height": "h=56", "input_width": "w=56",
                 "kernel": "k=3 or k=3x1"}  # fmt: skip


def echo(value: str) -> str:
    """`value` quoted for an error message, cut to `MAX_ECHO` characters with its length when longer."""
    if len(value) <= MAX_ECHO:
        return repr(value)
    return f"{value[:MAX_ECHO]!r}... ({len(value):,} characters)"


def _pairs(items: list[str], what: str) -> dict[str, str]:
    """``name=value`` items, several per item separated by commas; a comma part without ``=`` continues the value,
    an empty part (a stray comma) is skipped."""
    out: dict[str, str] = {}
    for item in items:
        key = None
        for part in item.split(","):
            if not part.strip():
                continue
            name, sep, value = part.partition("=")
            if sep and name.strip():
                key = name.strip()
                if key in out:  # (last-wins would run another problem than the one meant, silently)
                    raise UsageError(
                        f"{what} {key!r} is given twice ({echo(out[key])} and {echo(value.strip())}): give it once"
                    )
                out[key] = value.strip()
            elif key is not None and not sep:
                out[key] = f"{out[key]},{part.strip()}" if out[key] else part.strip()
            else:
                raise UsageError(f"{what} {echo(part)} is not name=value")
    for key, value in out.items():
        if not value:
            raise UsageError(f"{what} {key!r} has no value: write {key}=value")
    return out


def _int(key: str, value: str) -> int:
    """`value` as an integer, or an error that says what is wrong with it."""
    v = value.strip()
    if INT_TEXT.fullmatch(v):
        digits = len(v.lstrip("+-"))
        if digits > 18:  # (int() refuses past 4,300 digits, and no size comes near 10**18)
            raise UsageError(f"{key} has {digits:,} digits: sizes are at most 16,777,216")
        return int(v)
    if any(c in v for c in ";= "):
        how = ": separate the name=value items with commas, e.g. in=64,out=64"
    elif "_" in v:
        how = ": write the digits alone, e.g. 1000"
    else:
        how = ": write it in digits, e.g. 3"
    raise UsageError(f"{key}={echo(v)} is not an integer{how}")


def _yaml_value(what: str, key: str, text: str) -> Any:
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        raise UsageError(f"{what} {key}={text!r} is not a valid value") from None


def spec_from_flags(
    einsum: str | None,
    sizes: list[str],
    conv: str | None,
    dtype: str,
    weight: str | None,
    reduce_op: str,
    out_dtype: str | None,
) -> dict[str, Any]:
    """The README problem spec of ``--einsum/--size`` or ``--conv`` (validated by `workload.spec`)."""
    if einsum:
        spec: dict[str, Any] = {
            "kind": "einsum",
            "expr": einsum,
            "sizes": {k: _int(k, v) for k, v in _pairs(sizes, "--size").items()},
            "dtype": dtype,
            "reduce_op": reduce_op,
        }
        if weight is not None:
            spec["weight"] = int(weight) if weight.isdigit() else weight
        if out_dtype is not None:
            spec["out_dtype"] = out_dtype
        return spec
    if reduce_op != "add":
        raise UsageError("--reduce-op applies to --einsum problems; a conv2d always reduces with add")
    assert conv is not None
    spec = {"kind": "conv2d", "dtype": dtype}
    given: dict[str, str] = {}  # field -> the key that gave it
    for key, value in _pairs([conv], "--conv").items():
        if key not in CONV_KEYS:
            short = sorted(k for k, v in CONV_KEYS.items() if k != v or k == "batch")
            raise UsageError(
                f"--conv: unknown key {key!r}; keys: {', '.join(short)} (or the spec's names: "
                f"{', '.join(sorted(set(CONV_KEYS.values()) - {'batch'}))})"
            )
        field = CONV_KEYS[key]
        if field in given:
            raise UsageError(f"--conv: {field} is given twice (as {given[field]!r} and {key!r}): give it once")
        given[field] = key
        if field in CONV_PAIRS and not INT_TEXT.fullmatch(value):
            parts = value.lower().split("x")
            if len(parts) != 2 or not all(INT_TEXT.fullmatch(x.strip()) for x in parts):
                raise UsageError(f"--conv {key}={echo(value)}: give one integer or a pair HxW, e.g. {key}=3x1")
            spec[field] = [_int(key, x) for x in parts]
        else:
            spec[field] = _int(key, value)
    missing = [f"{f} ({example})" for f, example in CONV_REQUIRED.items() if f not in given]
    if missing:
        raise UsageError(f"--conv needs {', '.join(missing)}")
    if out_dtype is not None:
        spec["out_dtype"] = out_dtype
    return spec


def _nesting(data: Any) -> int:
    """How deeply lists and mappings nest (stops counting past MAX_NESTING; safe on cyclic aliases)."""
    deepest, stack = 0, [(data, 1)]
    while stack:
        node, depth = stack.pop()
        if not isinstance(node, dict | list):
            continue
        deepest = max(deepest, depth)
        if depth > MAX_NESTING:
            break
        stack.extend((child, depth + 1) for child in (node.values() if isinstance(node, dict) else node))
    return deepest


def _bracket_depth(text: str) -> int:
    """The deepest ``[``/``{`` nesting of a text, strings included (an upper bound that is cheap to take)."""
    depth = deepest = 0
    for ch in text:
        if ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth = max(0, depth - 1)
    return deepest


def read_problem_file(path: Path) -> list[Any]:
    """The problem specs of a JSON or YAML file: one problem, or a list of them."""
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror or e}") from None
    if len(raw) > MAX_FILE_BYTES:
        raise UsageError(f"{path} is {len(raw):,} bytes; a problem file may have at most {MAX_FILE_BYTES:,}")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise UsageError(
            f"{path} is not UTF-8 text (byte 0x{raw[e.start]:02x} at offset {e.start}): save it as UTF-8 JSON or YAML"
        ) from None
    too_deep = (
        f"{path} nests lists or mappings more than {MAX_NESTING} levels deep: a problem file is a mapping or a list"
    )
    if _bracket_depth(text) > 4 * MAX_NESTING:  # fail fast, before the parser recurses that deep
        raise UsageError(too_deep)
    try:
        data = yaml.safe_load(text)
    except RecursionError:
        raise UsageError(too_deep) from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        reason = getattr(e, "problem", None) or "syntax error"
        raise UsageError(f"{path} is not valid JSON or YAML{where}: {reason}") from None
    if _nesting(data) > MAX_NESTING:
        raise UsageError(too_deep)
    items = data if isinstance(data, list) else [data]
    if not items:
        raise UsageError(f"{path} holds an empty list: give a problem or a list of problems")
    return items


def read_network(onnx: Path | None, layers: Path | None, params: list[str], ops: list[str]) -> ImportedModel:
    """The layers of ``--onnx FILE`` (dynamic dimensions from ``--param name=size``) or ``--layers FILE``."""
    from workload.layer_list import MAX_LAYER_LIST_BYTES, load_layers
    from workload.onnx_import import MAX_MODEL_BYTES, import_onnx

    path = onnx if onnx is not None else layers
    assert path is not None
    limit = MAX_MODEL_BYTES if onnx is not None else MAX_LAYER_LIST_BYTES
    try:
        if path.stat().st_size > limit:
            raise UsageError(f"{path} is {path.stat().st_size:,} bytes; at most {limit:,} are read")
        raw = path.read_bytes()
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror or e}") from None
    if onnx is None:
        if params or ops:
            raise UsageError("--param and --op go with --onnx (a layer list has fixed sizes and chosen layers)")
        return load_layers(raw, name=path.name)
    sizes = {k: _int(k, v) for k, v in _pairs(params, "--param").items()}
    chosen = {o.strip() for item in ops for o in item.split(",") if o.strip()} or None
    return import_onnx(raw, params=sizes, name=path.stem, ops=chosen)


@cache
def _sequence_field(target: str, name: str) -> bool:
    """Whether a hardware field of a target's preset model is a tuple or a list."""
    from mapper.cache import resolve_factory

    try:
        hw = resolve_factory(None)(target, None).hardware
        field = type(hw).model_fields.get(name)
    except Exception:  # an unknown target or a family that fails to load: the run reports it
        return False
    if field is None:
        return False
    ann = field.annotation
    options = typing.get_args(ann) if typing.get_origin(ann) in (typing.Union, types.UnionType) else (ann,)
    return any(typing.get_origin(a) in (tuple, list) or a in (tuple, list) for a in options)


def parse_overrides(items: list[str], targets: list[str]) -> dict[str, Any]:
    """``--override name=value`` items; a tuple or list field takes one value or a comma list (or ``[a, b]``)."""
    out: dict[str, Any] = {}
    for key, text in _pairs(items, "--override").items():
        value = _yaml_value("--override", key, text)
        if not isinstance(value, list) and any(_sequence_field(t, key) for t in targets):
            value = [_yaml_value("--override", key, part.strip()) for part in text.split(",") if part.strip()]
        out[key] = value
    return out


def _targets(items: list[str]) -> list[str]:
    names = [t.strip() for item in items for t in item.split(",") if t.strip()] or ["rngd"]
    if len(set(names)) != len(names):
        raise UsageError(f"a target is given twice: {', '.join(names)}")
    return names


# ---- progress ----------------------------------------------------------------------------------
