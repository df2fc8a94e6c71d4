"""The parts of scripts/bench that measure the floor and latency.

- the file probe against its floor: one hand-written ``ssh host '<venv>/bin/python -c ...'``
  that reads config.json and every safetensors header of the 64-shard checkpoint;
- the fleet behind :mod:`relay` (a userspace relay adding a delay each way in front of
  every loopback sshd) at 0, 20 and 100 ms RTT, and the round trips each command needs,
  read off the latency: (wall at 100 ms - wall at 0 ms) / 100 ms;

Everything here is called with the :class:`bench.Bench` instance; nothing runs on import.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import statistics
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from fleet_sim.recordings import FILES_ONLY
from relay import RelayPool

if TYPE_CHECKING:
    from bench import Bench, Run, Series

RTTS_MS = (0, 20, 100)

# The floor of the file probe: what an engineer would type to read the same headers.
HAND_HEADERS = """\
import json, os, struct, sys
d = sys.argv[1]
c = json.load(open(os.path.join(d, "config.json")))
params = tensors = read = 0
for f in sorted(os.listdir(d)):
    if f.endswith(".safetensors"):
        with open(os.path.join(d, f), "rb") as fh:
            n = struct.unpack("<Q", fh.read(8))[0]
            h = json.loads(fh.read(n))
        read += 8 + n
        for k, v in h.items():
            if k != "__metadata__":
                p = 1
                for s in v["shape"]:
                    p *= s
                params += p
                tensors += 1
print(json.dumps({"model_type": c.get("model_type"), "tensors": tensors, "params": params, "bytes_read": read}))
"""


def hand_headers(bench: Bench) -> Run:
    r = bench.ssh(f"{shlex.quote(str(bench.venv / 'bin' / 'python'))} -c {shlex.quote(HAND_HEADERS)} "
                  f"{shlex.quote(str(bench.big))}")
    try:
        doc = json.loads(r.stdout)
    except ValueError:
        raise r.fail("the hand-written header read printed no JSON") from None
    if r.code != 0 or not doc.get("tensors"):
        raise r.fail("the hand-written header read failed")
    bench.hand_doc = doc
    return r


def bench_floor(bench: Bench) -> None:
    """3c: the files-only probe of the big checkpoint against one ssh running a header-reading one-liner."""
    from bench import Row, Series, alternate

    bench.log(f"3c. `probe --no-tokenizer` of the {bench.big_shards}-shard checkpoint vs a hand-written "
              "single `ssh host python -c` reading config.json and every header")
    probe = Series(f"introspect probe --no-tokenizer --no-model-code --no-cache ({bench.big_shards} shards)")
    floor = Series(f"hand-written `ssh host python -c` header read ({bench.big_shards} shards)")
    def run_probe() -> Run:
        return bench.checked_probe(bench.big, *FILES_ONLY, tokenizer=False)

    remote: list[float] = []

    def run_probe_timed() -> Run:
        r = run_probe()
        seconds = (bench.last_profile.get("timings") or {}).get("model")
        if isinstance(seconds, (int, float)):
            remote.append(float(seconds))
        return r

    alternate(bench.reps, [(probe, run_probe_timed), (floor, lambda: hand_headers(bench))], bench.log)
    bench.series += [probe, floor]
    ratio = probe.median / floor.median
    start = [s for s in bench.series if s.label.startswith("introspect --help")]
    why = (f"the remote file probe alone (config, index, sections, {bench.big_shards} headers in forked "
           f"workers) takes {statistics.median(remote or [0]):.2f} s of the floor's whole {floor.median:.2f} s; "
           f"the CLI uses {statistics.median(probe.cpu_s):.2f} CPU-s (start-up alone, `--help`: "
           + (f"{start[0].median:.2f} s" if start else "not measured in this run")
           + f") against the ssh client's {statistics.median(floor.cpu_s):.2f}; machine "
           f"{probe.machine_cpu:.2f} vs {floor.machine_cpu:.2f} CPU-s on {os.cpu_count()} CPU(s)")
    bench.rows.append(Row(f"3c. `probe --no-tokenizer`, {bench.big_shards} shards / hand-written single-ssh "
                          "header read", f"{ratio:.2f}× ({probe.median:.2f} s vs {floor.median:.2f} s)", "≤ 1.2×",
                          ratio <= 1.2, why))
    doc = getattr(bench, "hand_doc", {})
    bench.notes.append(f"3c. the floor reads the same {doc.get('bytes_read', 0) / 2**20:.1f} MiB of headers "
                       f"({doc.get('tensors')} tensors) "
                       "with json.loads and a loop over the shapes, in one interpreter; CPU-s local: "
                       f"{statistics.median(probe.cpu_s):.2f} (introspect CLI) vs "
                       f"{statistics.median(floor.cpu_s):.2f} (ssh client); machine: {probe.machine_cpu:.2f} vs "
                       f"{floor.machine_cpu:.2f} CPU-s")


def controller_rows(bench: Bench, series: list[Series], sizes: tuple[int, ...]) -> None:
    """Controller CPU (the CLI process's own user + system) per extra host, and the fixed start-up."""
    from bench import Row

    cpu = {n: statistics.median(s.cpu_s) for n, s in zip(sizes, series, strict=True)}
    per_host = (cpu[sizes[-1]] - cpu[sizes[0]]) / (sizes[-1] - sizes[0])
    start_up = cpu[sizes[0]] - per_host * sizes[0]
    bench.rows.append(Row("2a. controller CPU per extra host, `health --json`",
                          f"{per_host:.3f} CPU-s ({cpu[sizes[0]]:.2f} at {sizes[0]}, {cpu[sizes[-1]]:.2f} at "
                          f"{sizes[-1]} hosts)", "≤ 0.013 CPU-s", per_host <= 0.013,
                          "one SSH handshake, one session and one reply per host, in the controller's Python"))
    floor = {what: _import_cpu(bench, code) for what, code in IMPORT_FLOORS}
    parts = ", ".join(f"{what} {cpu:.3f}" for what, cpu in floor.items())
    bench.rows.append(Row("2b. controller start-up, `health --json` (CPU at 1 host less one host's share)",
                          f"{start_up:.3f} CPU-s (alone, CPU-s: {parts})", "≤ 0.15 CPU-s", start_up <= 0.15,
                          f"the imports alone (measured beside it): {parts}"))
    shipped_row(bench)


def shipped_row(bench: Bench) -> None:
    """2c: the bytes one health task sends into the remote interpreter (its stdin: the envelope with
    the task's modules), as the benchmark's health run builds it for its venv."""
    from bench import Row

    from introspect.checks.health import probe_request
    from introspect.inventory import VenvEntry
    from introspect.transport import shipping

    venv = VenvEntry(path=str(bench.venv), requires=("transformers", "tiktoken", "tokenizers"))
    names = shipping.task_modules("health")
    payload = shipping.envelope("health", probe_request(venv), timeout=60.0)
    raw = sum(len(shipping.remote_sources()[n]) for n in names)
    bench.rows.append(Row("2c. shipped into the remote interpreter per `health` task (its stdin)",
                          f"{len(payload) / 1000:.1f} kB ({len(names)} modules; their sources before stripping "
                          f"{raw / 1000:.1f} kB)", "≤ 60 kB", len(payload) <= 60_000,
                          "the task's modules as shipped: docstrings, comments and signature annotations cut"))


# What the start-up cannot go below: the interpreter, and the SSH stack the default transport needs.
IMPORT_FLOORS = (("bare interpreter", "pass"), ("import paramiko without invoke", "import introspect.transport.paramiko_lib"),
                 ("import of the health command", "import introspect.cli.main, introspect.cli.cmd_health"))


def _import_cpu(bench: Bench, code: str) -> float:
    """Median CPU-s of ``python -c code`` (bytecode cached, like the CLI runs)."""
    from bench import run

    runs = [run([sys.executable, "-c", code], env=bench.env, cwd=bench.cwd) for _ in range(bench.reps + 1)]
    return statistics.median(r.cpu_s for r in runs[1:])


# ------------------------------------------------------------------ latency


def _relayed(bench: Bench, pool: RelayPool, delay_s: float) -> list[Any]:
    """A view of every server behind its own relay (same address and host key, the relay's port)."""
    views = []
    for server in bench.servers:
        _host, port = pool.add((server.address, server.port), delay_s)
        view = dataclasses.replace(server, port=port, proc=None)
        with open(bench.client.known_hosts, "a") as fh:
            fh.write(view.known_hosts_line)
        views.append(view)
    return views


def bench_latency(bench: Bench, sizes: tuple[int, int] = (1, 32)) -> None:
    from bench import Row, Series, alternate, cpu_bound_why

    bench.log(f"6. latency: relays in front of every sshd at {', '.join(map(str, RTTS_MS))} ms RTT")
    walls: dict[tuple[str, int], Series] = {}
    with RelayPool() as pool:
        for rtt in RTTS_MS:
            views = _relayed(bench, pool, rtt / 2000)
            inventory = bench.write_inventory(views, f"hosts-{rtt}ms.yaml")
            calls: dict[str, Callable[[], Run]] = {
                f"health, {sizes[0]} host": lambda inv=inventory: bench.health(inv, sizes[0]),
                f"health, {sizes[1]} hosts": lambda inv=inventory: bench.health(inv, sizes[1]),
                "probe --no-tokenizer (Kimi-like)": lambda v=views[0]: _probe(bench, v),
                "ssh host true": lambda v=views[0]: _ssh_true(bench, v),
            }
            variants = []
            for what, call in calls.items():
                walls[(what, rtt)] = Series(f"{what} at {rtt} ms RTT (relay)")
                variants.append((walls[(what, rtt)], call))
            bench.log(f"  {rtt} ms RTT")
            alternate(bench.reps, variants, bench.log)
            bench.series += [s for s, _ in variants]
            if rtt == RTTS_MS[1]:
                trips = _round_trips(pool.relays[-len(views):], calls)
    one, most = walls[(f"health, {sizes[0]} host", 20)], walls[(f"health, {sizes[1]} hosts", 20)]
    ratio = most.median / one.median
    bench.rows.append(Row(f"6a. `health` at 20 ms RTT: {sizes[1]} hosts / {sizes[0]} host, wall",
                          f"{ratio:.2f}× ({most.median:.2f} s vs {one.median:.2f} s)", "≤ 2×", ratio <= 2,
                          cpu_bound_why(most, one, sizes[1])))
    for what, (connections, turns, hosts) in trips.items():
        low, high = walls[(what, 0)].median, walls[(what, 100)].median
        bench.rows.append(Row(f"6b. `{what}`: connections and round trips per host (counted by the relay)",
                              f"{connections / hosts:.0f} connection(s), {turns / hosts:.1f} round trips; wall "
                              f"{low:.2f} s at 0 ms → {high:.2f} s at 100 ms RTT", "(informational)", None))
    table = " | ".join(f"{rtt} ms: {walls[(f'health, {sizes[0]} host', rtt)].median:.2f} s / "
                       f"{walls[(f'health, {sizes[1]} hosts', rtt)].median:.2f} s" for rtt in RTTS_MS)
    bench.notes.append(f"6. `health` wall, {sizes[0]} / {sizes[1]} hosts, by RTT: {table}. The relay (scripts/relay.py, "
                       "asyncio in the bench process) delays every chunk by RTT/2 each way; bandwidth is not "
                       "limited. `ssh host true` needs the SSH handshake's round trips (banner, key exchange, "
                       "auth, channel, exec): introspect's extra round trips over it are its own")


def _round_trips(relays: list[Any], calls: dict[str, Callable[[], Run]]) -> dict[str, tuple[int, int, int]]:
    """(connections, round trips, hosts) of one run of each command, read off the relays' counters."""
    from relay import Turns

    out = {}
    for what, call in calls.items():
        for relay in relays:
            relay.connections, relay.turns = 0, Turns()
        call()
        used = [r for r in relays if r.connections]
        out[what] = (sum(r.connections for r in used), sum(r.turns.count for r in used), max(1, len(used)))
    return out


def _probe(bench: Bench, server: Any) -> Run:
    from bench import run

    r = run(bench.probe_argv(server, bench.model, *FILES_ONLY), env=bench.env, cwd=bench.cwd)
    if r.code not in (0, 1):
        raise r.fail("introspect probe through the relay failed")
    return r


def _ssh_true(bench: Bench, server: Any) -> Run:
    r = bench.ssh("true", server=server)
    if r.code != 0:
        raise r.fail("ssh host true through the relay failed")
    return r
