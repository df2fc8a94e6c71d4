"""``python -m scripts.fleet_sim serve|record``: the simulator's command line (see __init__.py).

serve: listen for the fleet, write its files into --dir (client key, known_hosts, hosts.yaml, an
Ansible INI and a pyinfra inventory, fleet.json), print fleet.json's document as one line on stdout
when every host listens, and run until SIGTERM/SIGINT. SIGUSR1 writes the counters to
<dir>/stats.json; SIGHUP starts a new epoch (drifting hosts change their versions).

record: run the real product against one passthrough host and write the recordings file (by default
the cache file of this product's version and sources; --if-missing keeps one already there).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import signal
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from scripts.fleet_sim import files  # noqa: E402
from scripts.fleet_sim.record import load_or_record, main_record  # noqa: E402
from scripts.fleet_sim.server import Simulator  # noqa: E402
from scripts.fleet_sim.spec import DEFAULT_MAX_STARTUPS, FleetSpec, MaxStartups  # noqa: E402


def raise_nofile() -> int:
    """Raise the open-file limit to its hard limit (each host is a listening socket, each
    connection another): the soft default of 1024 would refuse the 1,000th host."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m scripts.fleet_sim", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="listen for a simulated fleet")
    serve.add_argument("--hosts", type=int, required=True)
    serve.add_argument("--dir", type=Path, required=True, help="where the fleet's files go")
    serve.add_argument("--first-address", default="127.1.0.1")
    serve.add_argument("--rtt-ms", type=float, default=0.0)
    serve.add_argument("--bandwidth", type=float, default=0.0, help="bytes/s each way per host (0: unlimited)")
    for role in ("dead", "silent", "slow", "flaky", "hang"):
        serve.add_argument(f"--{role}", type=float, default=0.0, help=f"fraction of {role} hosts")
    serve.add_argument("--slow-s", type=float, default=2.0)
    serve.add_argument("--flaky-p", type=float, default=0.5)
    serve.add_argument("--drift", type=float, default=0.0)
    serve.add_argument("--no-vary", action="store_true", help="replay every frame byte for byte")
    serve.add_argument("--max-startups", default=DEFAULT_MAX_STARTUPS, help="start:rate:full, N or none")
    serve.add_argument("--seed", type=int, default=1)
    serve.add_argument("--recordings", type=Path, help="recordings file (default: recorded once into a cache)")
    serve.add_argument("--parallel", type=int, default=64, help="defaults.parallel of the written hosts.yaml")
    record = sub.add_parser("record", help="record the product's replies")
    record.add_argument("--out", type=Path, help="default: the cache file for this product's sources")
    record.add_argument("--if-missing", action="store_true", help="keep an existing file (print its path)")
    return parser.parse_args(argv)


def spec_of(args: argparse.Namespace) -> FleetSpec:
    return FleetSpec(args.hosts, first_address=args.first_address, rtt_ms=args.rtt_ms, bandwidth=args.bandwidth,
                     dead=args.dead, silent=args.silent, slow=args.slow, flaky=args.flaky, hang=args.hang,
                     slow_s=args.slow_s, flaky_p=args.flaky_p, drift=args.drift, vary=not args.no_vary,
                     max_startups=MaxStartups.parse(args.max_startups), seed=args.seed)


async def serve(args: argparse.Namespace) -> int:
    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    nofile = raise_nofile()
    spec = spec_of(args)
    recordings, rec_path = load_or_record(args.recordings, log)
    folder: Path = args.dir
    folder.mkdir(parents=True, exist_ok=True)
    sim = Simulator(spec, recordings, folder, log=log)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    stats = folder / "stats.json"
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_signal_handler(signal.SIGINT, stop.set)
    loop.add_signal_handler(signal.SIGUSR1, lambda: stats.write_text(json.dumps(sim.snapshot())))
    loop.add_signal_handler(signal.SIGHUP, lambda: setattr(sim.answers, "epoch", sim.answers.epoch + 1))
    try:
        endpoints = await sim.start()
        write_files(folder, endpoints, sim, recordings.meta, args.parallel)
        doc = files.manifest(endpoints, dir=folder, key=sim.key_path, known_hosts=folder / "known_hosts",
                             inventory=folder / "hosts.yaml", ansible_inventory=folder / "ansible.ini",
                             pyinfra_inventory=folder / "pyinfra_inventory.py", recordings=rec_path,
                             venv=recordings.meta.get("venv", ""), model=recordings.meta.get("model", ""),
                             python=recordings.meta.get("python", ""), nofile=nofile, spec=_spec_text(spec))
        (folder / "fleet.json").write_text(json.dumps(doc, indent=1) + "\n")
        print(json.dumps({k: v for k, v in doc.items() if k != "hosts"}), flush=True)
        await stop.wait()
    finally:
        stats.write_text(json.dumps(sim.snapshot()))
        await sim.close()
    return 0


def _spec_text(spec: FleetSpec) -> str:
    return (f"{spec.hosts} hosts from {spec.first_address}, rtt {spec.rtt_ms:g} ms, bandwidth "
            f"{spec.bandwidth or 'unlimited'}, dead {spec.dead:g}, silent {spec.silent:g}, slow {spec.slow:g}, "
            f"flaky {spec.flaky:g}, hang {spec.hang:g}, MaxStartups {spec.max_startups}, seed {spec.seed}")


def write_files(folder: Path, endpoints: list[files.Endpoint], sim: Simulator, meta: dict[str, object],
                parallel: int) -> None:
    known = folder / "known_hosts"
    files.write_known_hosts(known, endpoints)
    requires = [str(r) for r in meta.get("requires") or []]  # type: ignore[attr-defined]
    files.write_inventory(folder / "hosts.yaml", endpoints, key=sim.key_path, known_hosts=known,
                          venv=str(meta.get("venv") or "") or None, requires=requires, parallel=parallel)
    files.write_ansible_inventory(folder / "ansible.ini", endpoints, key=sim.key_path,
                                  python=str(meta.get("python") or "python3"))
    files.write_pyinfra_inventory(folder / "pyinfra_inventory.py", endpoints, key=sim.key_path, known_hosts=known)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.command == "record":
        return main_record(args.out, args.if_missing)
    return asyncio.run(serve(args))


if __name__ == "__main__":
    sys.exit(main())
