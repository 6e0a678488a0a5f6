"""``ncu-advise occupancy``: the occupancy calculator on the command line.

Registered by the main CLI as ``app.command("occupancy")(occupancy_command)``; input errors
are :class:`~ncu_advisor.errors.NcuAdviseError` (one line, exit code 2 there).
"""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Annotated

import typer

from ..derive.occupancy import calculator_summary

KIB = 1024
_LIMIT_LABELS = {"registers": "registers", "shared_mem": "shared memory", "warps": "warps",
                 "blocks": "block slots"}


class CalcFormat(StrEnum):
    """Output formats of ``occupancy``."""

    text = "text"
    json = "json"


def _bytes(n: int | None) -> str:
    """Format a byte count the way the CUDA docs do (KiB when whole or large)."""
    if n is None:
        return "-"
    if n >= KIB and n % (KIB // 4) == 0:
        return f"{n / KIB:g} KiB"
    return f"{n} B"


def _blocks(n: int) -> str:
    return f"{n} block" if n == 1 else f"{n} blocks"


def _limiter(text: str) -> str:
    return text.replace("shared_mem", "shared memory")


def render_occupancy_text(summary: dict) -> str:
    """Format a :func:`~ncu_advisor.derive.occupancy.calculator_summary` for an 80-column tty."""
    s = summary
    res = s["result"]
    lines = [
        f"Occupancy on cc {s['cc']} ({s['architecture']})",
        f"  {s['block_size']} threads/block, {s['registers_per_thread']} registers/thread, "
        f"{_bytes(s['shared_mem_per_block'])} shared memory/block",
        "",
        f"  Theoretical occupancy   {s['theoretical_pct']:5.1f} %  ({s['active_warps_per_sm']} of "
        f"{s['max_warps_per_sm']} warps per SM, {_blocks(s['active_blocks_per_sm'])})",
        "  Block limit per SM",
    ]
    notes = {
        "registers": f"{s['registers_per_warp']} registers allocated per warp",
        "shared_mem": f"{_bytes(s['shared_mem_per_block_allocated'])} per block of a "
                      f"{_bytes(s['shared_mem_config'])} carveout",
        "warps": f"{res['warps_per_block']} warps per block",
        "blocks": "resident blocks per SM",
    }
    for key, label in _LIMIT_LABELS.items():
        flag = "limiter" if key in s["limiters"] else ""
        lines.append(f"    {label:<14} {s['limits'][key]:>4} {flag:<8} {notes[key]}")
    rec = s["recommended"]
    if rec["block_size"]:
        grid = f", grid >= {rec['min_grid_size']}" if rec["min_grid_size"] else ""
        lines.append(f"  Recommended block size  {rec['block_size']} threads "
                     f"({rec['theoretical_pct']:.1f} %, {_blocks(rec['blocks_per_sm'])}/SM{grid})")
    else:
        lines.append("  Recommended block size  none: no block size fits one SM")
    w = s["what_if"]
    fewer = s["registers_per_thread"] - w["registers_per_thread"]
    lines.append(f"  With {fewer} fewer registers  {w['theoretical_pct']:5.1f} %  "
                 f"({w['registers_per_thread']} registers, limiter {_limiter(w['limiter'])})")
    nxt = s["next_block"]
    if nxt["registers_per_thread"] is not None:
        lines.append(f"  One more block needs    <= {nxt['registers_per_thread']} registers/thread")
    if nxt["shared_mem_per_block"] is not None:
        lines.append(f"  One more block needs    <= {_bytes(nxt['shared_mem_per_block'])} "
                     "shared memory/block")
    lines.extend(f"  warning: {w}" for w in s["warnings"])
    return "\n".join(lines) + "\n"


def occupancy_command(
    cc: Annotated[str, typer.Option(
        "--cc", help="Compute capability, e.g. 9.0, 8.6 or sm_90.")],
    block_size: Annotated[int, typer.Option(
        "--block-size", help="Threads per block (x*y*z).")],
    registers: Annotated[int, typer.Option(
        "--registers", help="Registers per thread (ptxas -v, or ncu's Registers Per Thread).")],
    shared_mem: Annotated[int, typer.Option(
        "--shared-mem", help="Static + dynamic shared memory per block, bytes.")] = 0,
    format: Annotated[CalcFormat, typer.Option(
        "--format", "-f", help="text or json.", case_sensitive=False)] = CalcFormat.text,
    sm_count: Annotated[int | None, typer.Option(
        "--sm-count", help="SMs on the device, to print the minimum grid that fills it.")] = None,
) -> None:
    """Theoretical occupancy, block limits and the best block size for a kernel."""
    summary = calculator_summary(cc, block_size, registers, shared_mem, sm_count=sm_count)
    if CalcFormat(format) is CalcFormat.json:
        typer.echo(json.dumps(summary, indent=2, allow_nan=False))
    else:
        typer.echo(render_occupancy_text(summary), nl=False)
