"""What `mapper targets` and `mapper workloads` list when no server is given, and how they print it."""

from __future__ import annotations

import json
from typing import Any

import typer
from rich.table import Table

from app.cli.common import out_console
from mapper.display import generic_table


def local_targets() -> list[dict[str, Any]]:
    """One row per preset: its family, the objectives it prices and its numeric figures."""
    from costmodels.presets import preset_family, preset_names
    from costmodels.registry import get_target

    rows = []
    for name in preset_names():
        row: dict[str, Any] = {"target": name, "family": preset_family(name)}
        try:
            t = get_target(name)
            hw = t.hardware.model_dump()
            row["objectives"] = list(t.objectives)
            row["figures"] = {k: v for k, v in hw.items() if isinstance(v, int | float) and not isinstance(v, bool)}
        except Exception as e:  # a family still being written must not hide the others
            row["error"] = f"{type(e).__name__}: {e}"
        rows.append(row)
    return rows


def print_targets(rows: list[dict[str, Any]], as_json: bool) -> None:
    """The rows of `local_targets` as JSON, or a table with the first six key figures."""
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    table = Table(title="targets", title_justify="left")
    for col in ("target", "family", "objectives", "key figures"):
        table.add_column(col, overflow="fold")  # (a figure wraps whole; it is never cut to an ellipsis)
    for row in rows:
        figures = ", ".join(f"{k}={v:g}" for k, v in list(row.get("figures", {}).items())[:6])
        table.add_row(
            row["target"], row["family"], ", ".join(row.get("objectives", [])), figures or row.get("error", "")
        )
    out_console().print(table)


def local_workloads() -> list[dict[str, Any]]:
    """One row per named workload: its layer count and its description (the first line of `describe`, whole)."""
    from workload.named import describe, load, names

    return [
        {"workload": n, "layers": len(load(n)), "description": describe(n).splitlines()[0].removeprefix(f"{n}: ")}
        for n in names()
    ]


def print_listing(title: str, data: Any, as_json: bool) -> None:
    """A listing as JSON, or as a table titled `title`."""
    if as_json:
        typer.echo(json.dumps(data, indent=2))
    else:
        out_console().print(generic_table(title, data))
