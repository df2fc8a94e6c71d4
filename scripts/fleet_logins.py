"""The logins of ``introspect health``, and nothing else: what one SSH login per host costs the controller.

Run by ``scripts/bench --fleet`` beside ``health --json`` on the same simulated fleet, so that the
controller CPU per host splits into its logins (key exchange, host key check, public-key auth,
close) and the rest (one session per host, the shipped task, its reply, the checks, the history).
Every piece is the product's own, as ``health`` puts them together: the inventory reader, one
executor per host from the connection flags (``cli/connect.py``), the look-ahead dialling
(``client/fleet_ahead.py``), the fleet runner and the per-sshd login pacing (``client/fleet.py``,
``client/fleet_pacing.py``); each host's ``connect()`` is followed by ``close()`` at once.

    python -m scripts.fleet_logins --hosts HOSTS.yaml [--parallel 200] [--ssh-config /dev/null]

Prints one JSON line: hosts, logged in, failed (with the first few causes) and the pacing counters.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter

from introspect.cli.connect import ConnectionFlags, entry_executors, fleet_known_hosts, select_fleet
from introspect.cli.options import HostSelection
from introspect.client.fleet import FleetMonitor, ItemFailure, run_fleet
from introspect.client.fleet_ahead import DialAhead
from introspect.client.fleet_pacing import endpoint_of
from introspect.inventory import HostEntry


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.fleet_logins", description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", required=True, help="the inventory (the simulator's hosts.yaml)")
    parser.add_argument("--parallel", type=int, default=200)
    parser.add_argument("--ssh-config", default="/dev/null")
    args = parser.parse_args(argv)
    flags = ConnectionFlags(host=None, port=None, user=None, identity=None, jump=None, known_hosts=None,
                            accept_new=False, ssh_config=args.ssh_config, connect_timeout=None,
                            hosts_file=args.hosts)
    inventory, hosts = select_fleet(args.hosts, HostSelection(host=None, hosts_file=args.hosts, all_hosts=True))
    make = entry_executors(flags, inventory, fleet_known_hosts(flags, inventory, hosts))  # as `health` does
    monitor = FleetMonitor(0.0)
    ahead = DialAhead(hosts, make, parallel=args.parallel, cancelled=lambda: monitor.cancelled)

    def login(host: HostEntry) -> str:
        executor = ahead.take(host)
        with monitor.connection(host.name, closer=executor.close):
            try:
                monitor.login(endpoint_of(host), executor.connect)
            finally:
                executor.close()
        return "ok"

    with ahead:
        results = run_fleet(hosts, login, parallel=args.parallel, monitor=monitor)
    failed = Counter(f"{type(r.error).__name__}: {str(r.error)[:80]}" for r in results if isinstance(r, ItemFailure))
    print(json.dumps({"hosts": len(hosts), "logged_in": sum(1 for r in results if r == "ok"),
                      "failed": sum(failed.values()), "causes": dict(failed.most_common(3)),
                      "fleet": dict(monitor.stats())}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
