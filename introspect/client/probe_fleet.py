"""``probe --all-hosts``: the same probe on many inventory hosts, and what a signal leaves of it.

One connection per host in a bounded pool, logins paced per sshd (:func:`introspect.client.fleet.run_fleet`).
A signal (Ctrl-C, SIGTERM, SIGHUP) keeps the hosts that finished: :class:`FleetProbeInterrupted`
carries every host's item, the unfinished ones saying they were not probed, so the CLI prints
the fleet document as far as it got and exits 128 + the signal, as a single probe does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from introspect.client.fleet import FleetInterrupted, FleetMonitor, FleetStats, ItemFailure, run_fleet
from introspect.client.fleet_ahead import DialAhead
from introspect.client.fleet_items import FleetItem, failure_from, failure_of
from introspect.client.fleet_pacing import endpoint_of
from introspect.client.fleet_spool import ItemSpool
from introspect.client.model import ProbeRequest, probe_model
from introspect.errors import IntrospectError
from introspect.interrupts import Terminated, cause, describe
from introspect.transport.base import Executor

if TYPE_CHECKING:
    from introspect.inventory import HostEntry, Inventory


class FleetProbeInterrupted(Terminated):
    """A signal stopped ``probe --all-hosts``: ``items`` in the hosts' order (the unfinished ones
    from :func:`not_probed`) and the fleet's connection counters so far."""

    def __init__(self, signum: int, items: Sequence[FleetItem], stats: FleetStats) -> None:
        super().__init__(signum)
        self.items, self.stats = items, stats


def not_probed(entry: HostEntry, signum: int) -> FleetItem:
    """The item of a host the signal stopped before its probe finished: no profile, and why."""
    _text, fix, kind = describe(signum)
    return {"host": entry.name, "exit_code": 128 + signum, "profile": None,
            "error": {"type": kind, "message": f"not probed: the run was {cause(signum)} before this host finished",
                      "hint": fix}}


def probe_hosts(request: ProbeRequest, hosts: Sequence[HostEntry], make_executor: Callable[[HostEntry], Executor],
                *, parallel: int, inventory: Inventory | None = None,
                on_done: Callable[[FleetItem], None] | None = None,
                ) -> tuple[Sequence[FleetItem], FleetStats]:
    """One item per host, in ``hosts`` order (``host``, ``exit_code``, ``profile``, ``error``), and
    the fleet's connection counters. ``on_done(item)`` is called in the calling thread as each
    host finishes (a progress display). A signal raises :class:`FleetProbeInterrupted`.
    The items are spooled compressed as each host finishes (:class:`ItemSpool`): read them one at a time."""
    monitor = FleetMonitor(0.0)  # logins paced per sshd in work(), no global start rate
    spool = ItemSpool(len(hosts))

    def store(index: int, item: FleetItem) -> FleetItem:
        spool.put(index, item)
        return {"host": item["host"], "exit_code": item["exit_code"], "profile": None, "error": None}

    def spooled(items: Sequence[FleetItem]) -> ItemSpool:
        for index, item in enumerate(items):
            if not spool.filled(index):  # not probed, or finished as the signal came
                spool.put(index, item)
        return spool

    ahead = DialAhead(hosts, make_executor, parallel=parallel, cancelled=lambda: monitor.cancelled)

    def work(entry: HostEntry) -> FleetItem:
        executor = ahead.take(entry)  # made ahead, maybe already waiting at the host's banner
        with monitor.connection(entry.name, closer=executor.close):
            # Logged in here, paced on the host's sshd (a refusal retried); probe_model keeps the connection.
            monitor.login(endpoint_of(entry), executor.connect)
            outcome = probe_model(request, executor, entry, inventory)
        return {"host": entry.name, "exit_code": outcome.code, "profile": outcome.profile,
                "error": failure_of(outcome.raw.get("fatal"))}

    with ahead:
        items = run_items(hosts, work, parallel=parallel, monitor=monitor, on_done=on_done, store=store,
                          interrupted=lambda signum, items: FleetProbeInterrupted(signum, spooled(items),
                                                                                  monitor.stats()))
    return spooled(items), monitor.stats()


def run_items(hosts: Sequence[HostEntry], work: Callable[[HostEntry], FleetItem], *, parallel: int,
              monitor: FleetMonitor, on_done: Callable[[FleetItem], None] | None,
              interrupted: Callable[[int, list[FleetItem]], BaseException],
              store: Callable[[int, FleetItem], FleetItem] | None = None) -> list[FleetItem]:
    """``work`` on every host through :func:`run_fleet`: one item per host in ``hosts`` order, a
    failure as :func:`failed`'s item. ``on_done(item)`` runs in the calling thread as each host
    finishes, then ``store(index, item)`` gives what the returned list keeps of it. A signal raises
    ``interrupted(signum, items)``, the unfinished hosts' items from :func:`not_probed`."""

    def done(_index: int, entry: HostEntry, result: FleetItem | ItemFailure[HostEntry]) -> None:
        if on_done is not None:
            on_done(_item(result))

    def kept(index: int, result: FleetItem | ItemFailure[HostEntry]) -> FleetItem:
        return _item(result) if store is None else store(index, _item(result))

    try:
        results = run_fleet(hosts, work, parallel=parallel, on_error=failed, monitor=monitor, on_done=done,
                            store=kept)
    except FleetInterrupted as stop:
        items = [not_probed(entry, stop.signum) if result is None else _item(result)
                 for entry, result in zip(hosts, stop.results, strict=True)]
        raise interrupted(stop.signum, items) from stop
    return [_item(result) for result in results]


def failed(entry: HostEntry, exc: BaseException, _seconds: float) -> FleetItem:
    code = exc.exit_code if isinstance(exc, IntrospectError) else 1
    return {"host": entry.name, "exit_code": code, "profile": None, "error": failure_from(exc)}


def _item(result: FleetItem | ItemFailure[HostEntry]) -> FleetItem:
    return failed(result.item, result.error, result.seconds) if isinstance(result, ItemFailure) else result


__all__ = ["FleetProbeInterrupted", "not_probed", "probe_hosts", "run_items"]
