"""The report of ``scripts/bench --fleet``: the tables, every target judged, and the SVG plot.

The targets (the fleet benchmark's, at 1,000 simulated hosts and 50 ms RTT): controller CPU at most
0.013 CPU-s per host, peak RSS at most 0.5 MB per host, wall at most 1.5x the machine's CPU-bound
floor ((controller + simulator CPU-s) / cores), no host's silence adding more than its deadline, and
introspect ahead of every peer on wall and controller CPU at 100 and 1,000 hosts. Each is printed
as met or not, with the numbers that say why.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench_fleet_measure import REPO, Measured, Peaks

sys.path.insert(0, str(REPO))
from introspect.transport.settings import DEFAULT_BANNER_TIMEOUT  # noqa: E402

TARGET = (1000, 50)  # hosts, RTT ms
CPU_PER_HOST = 0.013
LOGINS = "logins only (scripts/fleet_logins)"  # health's logins measured alone
RSS_MB_PER_HOST = 0.5
WALL_OVER_FLOOR = 1.5
PEER_SIZES = (100, 1000)
MB = 1e6


@dataclass
class Machine:
    cores: int
    nofile: int
    load_before: tuple[float, float, float]
    busy_before: float
    load_after: tuple[float, float, float] = (0.0, 0.0, 0.0)
    busy_after: float = 0.0


def floor_s(m: Measured, cores: int) -> float:
    return (m.cpu + m.sim_cpu) / cores


def _row(m: Measured, cores: int) -> str:
    floor = floor_s(m, cores)
    rss = m.peak_rss_kib * 1024 / MB
    return (f"| {m.label.split(' --')[0]} | {m.hosts} | {m.rtt_ms:g} | {m.wall:.1f} | {m.cpu:.2f} | "
            f"{m.cpu / m.hosts:.4f} | {m.sim_cpu:.2f} | {floor:.1f} | {m.wall / floor if floor else 0:.1f}× | "
            f"{rss:.0f} | {rss / m.hosts:.2f} | {m.peaks.fds} | {m.peaks.threads} | {m.connections / m.wall:.0f} | "
            f"{m.answered_hosts} / {m.unreachable} |")


def runs_table(rows: list[Measured], cores: int) -> list[str]:
    out = ["| job | hosts | RTT ms | wall s | controller CPU-s | CPU-s / host | simulator CPU-s | CPU floor s | "
           "wall / floor | peak RSS MB | MB / host | peak fds | peak threads | SSH conn/s | answered / unreachable |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    return out + [_row(m, cores) for m in sorted(rows, key=lambda r: (r.label, r.hosts, r.rtt_ms))]


def peers_table(rows: list[Measured], peers: list[Measured]) -> list[str]:
    out = ["| tool | hosts | RTT ms | wall s | controller CPU-s | CPU-s / host | peak memory MB (introspect: RSS; "
           "peers: PSS of all their processes) | peak processes | answered |", "|---|---|---|---|---|---|---|---|---|"]
    keys = sorted({(p.hosts, p.rtt_ms) for p in peers})
    for hosts, rtt in keys:
        same = [m for m in rows if (m.hosts, m.rtt_ms) == (hosts, rtt) and "health" in m.label]
        for m in same + [p for p in peers if (p.hosts, p.rtt_ms) == (hosts, rtt)]:
            out.append(f"| {m.label} | {m.hosts} | {m.rtt_ms:g} | {m.wall:.1f} | {m.cpu:.2f} | {m.cpu / m.hosts:.4f} | "
                       f"{m.peak_rss_kib * 1024 / MB:.0f} | {m.peaks.processes} | {m.answered_hosts} |")
    return out


def _find(rows: list[Measured], hosts: int, rtt: float, word: str) -> Measured | None:
    return next((m for m in rows if m.hosts == hosts and m.rtt_ms == rtt and word in m.label), None)


def _verdict(metric: str, measured: str, target: str, met: bool | None, why: str) -> str:
    mark = "not run" if met is None else ("yes" if met else "**no**")
    return f"| {metric} | {measured} | {target} | {mark} | {why if met is not True else ''} |"


def targets(rows: list[Measured], peers: list[Measured], clean: Measured | None, cores: int) -> list[str]:
    hosts, rtt = TARGET
    out = ["| target (at 1,000 hosts, 50 ms RTT, 5% dead + 5% silent) | measured | target | met? | "
           "why not (measured) |", "|---|---|---|---|---|"]
    h = _find(rows, hosts, rtt, "health")
    if h is None:
        return out + [_verdict("every target", "—", "—", None, "the 1,000-host 50 ms fleet was not run "
                               "(--sizes/--rtts)")]
    per = h.cpu / hosts
    out.append(_verdict("controller CPU per host (`health --json`)", f"{per:.4f} CPU-s ({h.cpu:.1f} CPU-s: user "
                        f"{h.user_s:.1f}, system {h.sys_s:.1f})", f"≤ {CPU_PER_HOST}", per <= CPU_PER_HOST,
                        _cpu_why(h, _find(rows, hosts, rtt, LOGINS))))
    rss = h.peak_rss_kib * 1024 / MB / hosts
    out.append(_verdict("peak RSS per host", f"{rss:.3f} MB ({h.peak_rss_kib * 1024 / MB:.0f} MB peak)",
                        f"≤ {RSS_MB_PER_HOST} MB", rss <= RSS_MB_PER_HOST,
                        f"{h.peaks.threads} threads and {h.peaks.fds} fds at the peak"))
    floor = floor_s(h, cores)
    ratio = h.wall / floor
    out.append(_verdict("wall / CPU-bound floor", f"{ratio:.2f}× ({h.wall:.1f} s vs {floor:.1f} s = ({h.cpu:.1f} + "
                        f"{h.sim_cpu:.1f}) CPU-s / {cores} cores)", f"≤ {WALL_OVER_FLOOR}×", ratio <= WALL_OVER_FLOOR,
                        _wall_why(h, cores)))
    out.append(_silence(h, clean))
    for size in PEER_SIZES:
        out += _versus_peers(rows, peers, size)
    return out


def _cpu_why(h: Measured, logins: Measured | None) -> str:
    """Where the CPU goes: the same logins measured alone (scripts/fleet_logins.py), and the rest."""
    why = f"{h.cpu:.1f} CPU-s for {h.hosts} hosts, {h.logins} logins"
    if logins is None or not logins.cpu:
        return why + " (the logins were not measured alone)"
    return (f"{why}; the same logins alone (key exchange, host key, public-key auth, close; the same runner and "
            f"pacing) took {logins.cpu:.1f} CPU-s ({logins.cpu / h.cpu:.0%}); the rest, {h.cpu - logins.cpu:.1f} "
            f"CPU-s, is one session per host, the shipped task, its reply and the checks")


def _wall_why(h: Measured, cores: int) -> str:
    busy = h.machine_cpu / h.wall / cores
    why = (f"the machine was {busy:.0%} busy over the run; {h.connections} SSH connections at "
           f"{h.connections / h.wall:.0f}/s")
    stagger, burst = h.pacing.get("stagger_s"), h.pacing.get("burst")
    if isinstance(stagger, (int, float)) and isinstance(burst, int) and stagger > 0:
        why += (f"; the controller starts at most one connection per {stagger:g} s after a burst of {burst}, so "
                f"{h.hosts} hosts need ≥ {max(0, h.hosts - burst) * stagger:.0f} s of pacing alone")
    refusals, peak = h.pacing.get("refusals"), h.pacing.get("handshakes_peak")
    if isinstance(refusals, int) and isinstance(peak, int):
        why += (f"; logins paced per sshd ({refusals} MaxStartups refusals retried), at most {peak} key "
                f"exchanges at once of {h.pacing.get('handshakes_limit')}")
    if h.silent_max_s is not None:
        why += f"; the slowest silent host held its slot {h.silent_max_s:.1f} s"
    return why


def _silence(h: Measured, clean: Measured | None) -> str:
    deadline = DEFAULT_BANNER_TIMEOUT
    if clean is None or h.silent_max_s is None:
        return _verdict("silence adds ≤ its deadline", "—", f"≤ {deadline:g} s", None,
                        "no reference run without silent hosts, or no silent host")
    added = h.wall - clean.wall
    met = added <= deadline and h.silent_max_s <= deadline + 1
    return _verdict("what the silent hosts add to the wall", f"{added:+.1f} s ({h.wall:.1f} s vs {clean.wall:.1f} s "
                    f"without them); slowest silent host {h.silent_max_s:.1f} s", f"≤ {deadline:g} s (banner "
                    "deadline)", met, f"silent hosts occupy a worker for their {h.silent_max_s:.1f} s each")


def _versus_peers(rows: list[Measured], peers: list[Measured], size: int) -> list[str]:
    mine = [m for m in rows if m.hosts == size and "health" in m.label]
    theirs = [p for p in peers if p.hosts == size]
    if not mine or not theirs:
        return [_verdict(f"ahead of every peer at {size} hosts", "—", "wall and CPU below each peer's", None,
                         "peers not run at this size (--no-peers, --sizes or --peer-rtt)")]
    out = []
    for p in theirs:
        m = next((r for r in mine if r.rtt_ms == p.rtt_ms), mine[0])
        met = m.wall < p.wall and m.cpu < p.cpu
        why = f"wall {m.wall / p.wall:.2f}×, CPU {m.cpu / p.cpu:.2f}× the peer's"
        logins = _find(rows, size, m.rtt_ms, LOGINS)
        if logins is not None and m.cpu >= p.cpu:
            why += (f"; introspect's logins alone took {logins.cpu:.1f} CPU-s ({logins.cpu / p.cpu:.2f}× the peer's "
                    "whole job)")
        out.append(_verdict(f"{size} hosts: `health --json` vs {p.label}", f"wall {m.wall:.1f} vs {p.wall:.1f} s; "
                            f"CPU {m.cpu:.1f} vs {p.cpu:.1f} s", "both lower", met, why))
    return out


def render(rows: list[Measured], peers: list[Measured], clean: Measured | None, machine: Machine, elapsed: float,
           args: argparse.Namespace, failures: list[str]) -> str:
    lb, la = machine.load_before, machine.load_after
    out = ["", "### One run of `scripts/bench --fleet`", "",
           f"Machine: {machine.cores} core(s), Python {sys.version.split()[0]}, open-file limit {machine.nofile}; "
           f"load average before {lb[0]:.2f} / {lb[1]:.2f} / {lb[2]:.2f}, after {la[0]:.2f} / {la[1]:.2f} / "
           f"{la[2]:.2f}; CPUs busy with other work while the bench idled: {machine.busy_before:.2f} before, "
           f"{machine.busy_after:.2f} after. Fleet: {int(args.dead * 100)}% dead, {int(args.silent * 100)}% silent "
           f"hosts, MaxStartups {args.max_startups}, introspect --parallel {args.parallel}.", "",
           "#### Targets", ""] + targets(rows, peers, clean, machine.cores)
    out += ["", "#### Runs", "", "CPU floor = (controller + simulator CPU-s) / cores: the shortest wall this "
            "machine allows if both kept every core busy. SSH conn/s: connections the simulator accepted per "
            "second of wall.", ""] + runs_table(rows, machine.cores)
    if peers:
        out += ["", "#### The same fleet, the peers' version job", ""] + peers_table(rows, peers)
    notes = [f"- {m.label}, {m.hosts} hosts, {m.rtt_ms:g} ms: {'; '.join(m.notes)}" for m in rows + peers if m.notes]
    notes += [f"- not measured: {why}" for why in failures]
    if notes:
        out += ["", "#### Notes", ""] + notes
    if clean is not None:
        out += ["", f"Reference: `health --json` on {clean.hosts} hosts at {clean.rtt_ms:g} ms without dead or silent "
                f"hosts: {clean.wall:.1f} s wall, {clean.cpu:.1f} controller CPU-s, {clean.sim_cpu:.1f} simulator "
                "CPU-s."]
    out += ["", f"bench --fleet: done in {elapsed:.0f} s"]
    return "\n".join(out)


# ------------------------------------------------------------------ saved results


def save(path: Path, rows: list[Measured], peers: list[Measured], clean: Measured | None, machine: Machine,
         elapsed: float, args: argparse.Namespace, failures: list[str]) -> None:
    """Every measurement of the run as JSON (without the commands' output): ``--replot`` renders the
    report and the plot again from it, without running a fleet."""
    def one(m: Measured) -> dict[str, Any]:
        return {k: v for k, v in dataclasses.asdict(m).items() if k not in ("stdout", "stderr")}

    doc = {"rows": [one(m) for m in rows], "peers": [one(m) for m in peers],
           "clean": one(clean) if clean is not None else None, "machine": dataclasses.asdict(machine),
           "elapsed": elapsed, "failures": failures,
           "args": {k: getattr(args, k) for k in ("dead", "silent", "max_startups", "parallel")}}
    path.write_text(json.dumps(doc, indent=1) + "\n")


def load(path: Path) -> tuple[list[Measured], list[Measured], Measured | None, Machine, float,
                              argparse.Namespace, list[str]]:
    doc = json.loads(path.read_text())

    def one(d: dict[str, Any]) -> Measured:
        return Measured(**{**d, "peaks": Peaks(**d["peaks"]), "stdout": b"", "stderr": b""})

    machine = doc["machine"]
    machine.update(load_before=tuple(machine["load_before"]), load_after=tuple(machine["load_after"]))
    return ([one(d) for d in doc["rows"]], [one(d) for d in doc["peers"]],
            one(doc["clean"]) if doc.get("clean") else None, Machine(**machine), float(doc["elapsed"]),
            argparse.Namespace(**doc["args"]), list(doc.get("failures") or []))


# ------------------------------------------------------------------ the plot


COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf", "#7f7f7f",
          "#bcbd22", "#393b79", "#ad494a", "#637939", "#7b4173"]


def _series(rows: list[Measured], peers: list[Measured], value: str) -> dict[str, list[tuple[float, float]]]:
    lines: dict[str, list[tuple[float, float]]] = {}
    for m in [r for r in rows if r.label != LOGINS] + peers:
        name = f"{m.label.split(' --')[0].replace('introspect ', '')}, {m.rtt_ms:g} ms"
        y = m.wall if value == "wall" else m.peak_rss_kib * 1024 / MB
        lines.setdefault(name, []).append((m.hosts, y))
    return {k: sorted(v) for k, v in lines.items() if v}


def _panel(x0: float, title: str, unit: str, lines: dict[str, list[tuple[float, float]]]) -> list[str]:
    w, h, left, top = 420.0, 300.0, x0 + 60, 40.0
    xs = [p[0] for pts in lines.values() for p in pts] or [10.0]
    ys = [max(p[1], 1e-3) for pts in lines.values() for p in pts] or [1.0]
    lx = (math.log10(min(xs)), math.log10(max(xs)) if max(xs) > min(xs) else math.log10(min(xs)) + 1)
    ly = (math.floor(math.log10(min(ys))), math.ceil(math.log10(max(ys))) or 1)
    if ly[1] <= ly[0]:
        ly = (ly[0], ly[0] + 1)

    def px(x: float) -> float:
        return left + (math.log10(x) - lx[0]) / (lx[1] - lx[0]) * (w - 80)

    def py(y: float) -> float:
        return top + h - (math.log10(max(y, 1e-3)) - ly[0]) / (ly[1] - ly[0]) * h

    out = [f'<text x="{left + (w - 80) / 2:.0f}" y="24" text-anchor="middle" font-weight="bold">{title}</text>',
           f'<rect x="{left}" y="{top}" width="{w - 80}" height="{h}" fill="none" stroke="#444"/>']
    for x in sorted(set(xs)):
        out.append(f'<text x="{px(x):.1f}" y="{top + h + 16}" text-anchor="middle">{x:g}</text>')
    for e in range(ly[0], ly[1] + 1):
        out.append(f'<line x1="{left}" x2="{left + w - 80}" y1="{py(10 ** e):.1f}" y2="{py(10 ** e):.1f}" '
                   'stroke="#ddd"/>')
        out.append(f'<text x="{left - 6}" y="{py(10 ** e) + 4:.1f}" text-anchor="end">{10 ** e:g}</text>')
    out.append(f'<text x="{left + (w - 80) / 2:.0f}" y="{top + h + 34}" text-anchor="middle">hosts</text>')
    out.append(f'<text x="{x0 + 14}" y="{top + h / 2:.0f}" transform="rotate(-90 {x0 + 14} {top + h / 2:.0f})" '
               f'text-anchor="middle">{unit}</text>')
    for i, (name, pts) in enumerate(sorted(lines.items())):
        color = COLORS[i % len(COLORS)]
        dash = _dash(name)
        path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in pts)
        out.append(f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="2"{dash}/>')
        out += [f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3" fill="{color}"/>' for x, y in pts]
    return out


def _dash(name: str) -> str:
    """Solid: health; dashed: the files-only probe; dotted: the peers."""
    if "probe" in name:
        return ' stroke-dasharray="5 3"'
    return "" if "health" in name else ' stroke-dasharray="2 2"'


def _legend(names: list[str], y0: float) -> list[str]:
    out = []
    for i, name in enumerate(names):
        x, y = 70 + (i % 3) * 290, y0 + (i // 3) * 18
        color = COLORS[i % len(COLORS)]
        out.append(f'<line x1="{x}" x2="{x + 24}" y1="{y - 4}" y2="{y - 4}" stroke="{color}" stroke-width="2"'
                   f'{_dash(name)}/>')
        out.append(f'<text x="{x + 30}" y="{y}">{name}</text>')
    return out


def svg(rows: list[Measured], peers: list[Measured]) -> str:
    """Wall time and peak RSS against hosts (log-log), one line per job and RTT (peers dotted)."""
    walls, rss = _series(rows, peers, "wall"), _series(rows, peers, "rss")
    names = sorted(walls)
    height = 400 + 18 * math.ceil(len(names) / 3)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="900" height="{height}" font-family="sans-serif" '
             'font-size="11">', '<rect width="100%" height="100%" fill="white"/>']
    parts += _panel(0, "wall time vs hosts", "wall, s", walls)
    parts += _panel(450, "controller peak memory vs hosts", "MB (introspect: RSS; peers: PSS)", rss)
    parts += _legend(names, 395)
    parts.append(f'<text x="10" y="{height - 6}" fill="#666">scripts/bench --fleet on {os.cpu_count()} core(s): '
                 'simulated hosts (scripts/fleet_sim), one run each; solid health, dashed files-only probe, '
                 'dotted peers</text>')
    return "\n".join(parts + ["</svg>"]) + "\n"
