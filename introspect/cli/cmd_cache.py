"""``introspect cache info|clear``: the local result cache of ``probe`` (see :mod:`introspect.client.cache`)."""

from __future__ import annotations

import json
import os
import shlex

import click

from introspect.cli import help_examples
from introspect.cli.outcome import Finished, Notice
from introspect.client.cache import CACHE_MAX_ENV, ProbeCache
from introspect.errors import IntrospectError


@click.group("cache", epilog=help_examples.CACHE)
def cache() -> None:
    """The local cache of probe results: where it is, how big, and emptying it."""


def _not_a_directory(store: ProbeCache) -> tuple[Notice, ...]:
    if store.root.exists() and not store.root.is_dir():
        hint = ("unset INTROSPECT_CACHE_DIR  # or set it to a directory" if os.environ.get("INTROSPECT_CACHE_DIR")
                else f"ls -ld {shlex.quote(str(store.root))}  # move it away: the cache needs a directory there")
        return (Notice(f"the result cache {store.root} is not a directory: probes are not cached", hint,
                       level="warning"),)
    return ()


@cache.command("info", epilog=help_examples.CACHE_INFO)
@click.option("--json", "as_json", is_flag=True, help="Print as JSON on stdout.")
def info(as_json: bool) -> Finished:
    """Where the cache is, how many entries, how many bytes, and its cap."""
    store = ProbeCache()
    facts = store.info()
    if as_json:
        click.echo(json.dumps({"schema": "introspect.cache/v1", "path": str(facts.path), "entries": facts.entries,
                               "bytes": facts.bytes, "max_bytes": facts.max_bytes,
                               "partial_files": facts.partial_files}, indent=2))
        return Finished(0, _not_a_directory(store))
    from introspect.cli.render import human_bytes
    from introspect.cli.render_term import fold_lines  # at word boundaries, to the terminal

    click.echo("\n".join(fold_lines(f"cache: {facts.path}")))
    click.echo("\n".join(fold_lines(f"entries: {facts.entries} ({human_bytes(facts.bytes)} of at most "
                                    f"{human_bytes(facts.max_bytes)}; set {CACHE_MAX_ENV} to change the cap)")))
    if facts.partial_files:
        click.echo("\n".join(fold_lines(f"partial files of interrupted writes: {facts.partial_files} "
                                        "(removed once their writer is gone)")))
    return Finished(0, _not_a_directory(store))


@cache.command("clear", epilog=help_examples.CACHE_CLEAR)
def clear() -> Finished:
    """Remove every cached probe result (the next probe of each model runs in full)."""
    store = ProbeCache()
    try:
        removed = store.clear()
    except OSError as exc:
        raise IntrospectError(f"cannot list the result cache {store.root}: {exc.strerror or exc}",
                              hint=f"ls -ld {shlex.quote(str(store.root))}  # it must be readable by you") from None
    click.echo(f"removed {removed} cached result(s) from {store.root}")
    return Finished(0, _not_a_directory(store))
