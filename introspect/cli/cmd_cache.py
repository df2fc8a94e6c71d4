"""``introspect cache info|clear``: the local result cache of ``probe`` (see :mod:`introspect.client.cache`)."""

from __future__ import annotations

import json

import click

from introspect.client.cache import CACHE_MAX_ENV, ProbeCache


@click.group("cache")
def cache() -> None:
    """The local cache of probe results: where it is, how big, and emptying it."""


@cache.command("info")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON on stdout.")
def info(as_json: bool) -> int:
    """Where the cache is, how many entries, how many bytes, and its cap."""
    facts = ProbeCache().info()
    if as_json:
        click.echo(json.dumps({"schema": "introspect.cache/v1", "path": str(facts.path), "entries": facts.entries,
                               "bytes": facts.bytes, "max_bytes": facts.max_bytes}, indent=2))
        return 0
    from introspect.cli.render import human_bytes

    click.echo(f"cache: {facts.path}")
    click.echo(f"entries: {facts.entries} ({human_bytes(facts.bytes)} of at most {human_bytes(facts.max_bytes)}; "
               f"set {CACHE_MAX_ENV} to change the cap)")
    return 0


@cache.command("clear")
def clear() -> int:
    """Remove every cached probe result (the next probe of each model runs in full)."""
    store = ProbeCache()
    removed = store.clear()
    click.echo(f"removed {removed} cached result(s) from {store.root}")
    return 0
