"""Fleet ``probe``: one row per host (what it is, how it went), full reports behind ``--full``."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rich.markup import escape

from introspect.cli.fix_lines import print_fleet_fixes
from introspect.cli.render import human_count, print_report
from introspect.cli.render_term import Col, make_console, print_rows
from introspect.remote.contract import as_dict

if TYPE_CHECKING:
    from introspect.client.fleet_items import FleetItem

FLEET_COLUMNS = (Col("host"), Col("exit", "num"), Col("model type"), Col("layers", "num"),
                 Col("params (total / active)", "num"), Col("findings"), Col("note", "text"))


def _findings(profile: dict[str, Any] | None) -> str:
    if profile is None:
        return "-"
    counts = Counter(str(as_dict(f).get("severity")) for f in profile.get("findings") or [])
    parts = [f"{counts[s]} {s}{'s' * (counts[s] != 1)}" for s in ("error", "warning") if counts[s]]
    return ", ".join(parts) or "none"


def _note(item: FleetItem) -> str:
    error = item["error"]
    if error:
        return str(error.get("message"))
    profile = item["profile"] or {}
    first = next((as_dict(f) for f in profile.get("findings") or [] if as_dict(f).get("severity") == "error"), {})
    return str(first.get("message") or "ok")


def fleet_row(item: FleetItem) -> list[str]:
    profile = item["profile"] or {}
    arch = as_dict(profile.get("architecture"))
    params = as_dict(arch.get("params"))
    sizes = f"{human_count(params.get('total'))} / {human_count(params.get('active'))}" if params else "-"
    cells = [item["host"], str(item["exit_code"]), str(arch.get("model_type") or "-"),
             str(arch.get("num_layers") or "-"), sizes, _findings(item["profile"]), _note(item)]
    return [escape(cell) for cell in cells]


def progress_row(item: FleetItem) -> str:
    mark = "[green]✓[/]" if item["exit_code"] == 0 else "[bold red]✗[/]"
    return f"{mark} {escape(str(item['host']))} [dim](exit {item['exit_code']})[/] {escape(_note(item))}"


def print_fleet(results: Sequence[FleetItem], *, full: bool) -> None:
    console = make_console()
    print_rows(console, FLEET_COLUMNS, [fleet_row(item) for item in results])
    if not full:
        console.print("[dim](--full for every host's report)[/]")
        print_fleet_fixes(console, results)  # each command once, with the hosts that need it
        return
    for item in results:
        console.print(f"\n[bold]=== {escape(str(item['host']))} (exit {item['exit_code']}) ===[/]", soft_wrap=True)
        if item["profile"] is not None:
            print_report(item["profile"], console)
    print_fleet_fixes(console, results)
