"""The inventory's schema: which keys exist where, their types, and how entries inherit.

Also the host selection of fleet commands (``--only``, ``--tags``).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from introspect.inventory.checker import HOST_NAME_RE, MODULE_RE, TAG_RE, Checker, join_key, kind_of
from introspect.inventory.marked import MarkedMap, MarkedSeq
from introspect.inventory.model import (
    MAX_INVENTORY_BYTES,
    Defaults,
    HostEntry,
    Inventory,
    InventoryError,
    VenvEntry,
)

_TOP_KEYS = ("defaults", "hosts")
_DEFAULT_KEYS = ("user", "port", "identity", "passphrase_env", "connect_timeout", "parallel",
                 "known_hosts", "remote_code", "probe_timeout")
_HOST_KEYS = ("name", "address", "url", "port", "user", "identity", "passphrase_env", "jump", "tags",
              "remote_code", "roots", "venvs", "python")
_VENV_KEYS = ("path", "requires", "imports", "models", "remote_code", "min_free_gb")


def _parse_defaults(c: Checker, raw: Any, line: int | None) -> Defaults:
    m = c.mapping(raw, line, "defaults", _DEFAULT_KEYS)
    d = Defaults()
    return Defaults(
        user=c.get(m, "user", "defaults", c.user),
        port=c.get(m, "port", "defaults", c.port),
        identity=c.get(m, "identity", "defaults", c.string),
        passphrase_env=c.get(m, "passphrase_env", "defaults", c.env_name),
        connect_timeout=c.get(m, "connect_timeout", "defaults", c.number, d.connect_timeout),
        parallel=c.get(m, "parallel", "defaults",
                       lambda v, ln, k: c.integer(v, ln, k, 1, 1024), d.parallel),
        parallel_set="parallel" in m,
        known_hosts=c.get(m, "known_hosts", "defaults", c.string),
        remote_code=c.get(m, "remote_code", "defaults", c.boolean, d.remote_code),
        remote_code_set="remote_code" in m,
        probe_timeout=c.get(m, "probe_timeout", "defaults", c.number, d.probe_timeout),
    )


def _parse_venv(c: Checker, raw: Any, line: int, key: str, inherited_remote_code: bool,
                inherited_set: bool = False) -> VenvEntry:
    m = c.mapping(raw, line, key, _VENV_KEYS)
    if "path" not in m or m["path"] is None:
        c.fail(m.line, key, "missing required key 'path' (the venv directory, e.g. /opt/venvs/serve)")
    return VenvEntry(
        path=c.get(m, "path", key, c.remote_path),
        requires=c.get(m, "requires", key, lambda v, ln, k: c.str_list(v, ln, k, c.requirement), ()),
        imports=c.get(m, "imports", key,
                      lambda v, ln, k: c.str_list(v, ln, k, c.pattern(MODULE_RE, "module name")), ()),
        models=c.get(m, "models", key, lambda v, ln, k: c.str_list(v, ln, k, c.remote_path), ()),
        remote_code=c.get(m, "remote_code", key, c.boolean, inherited_remote_code),
        remote_code_set=inherited_set or "remote_code" in m,
        min_free_gb=c.get(m, "min_free_gb", key, lambda v, ln, k: c.number(v, ln, k, positive=False)),
    )


def _parse_host(c: Checker, name: str, raw: Any, line: int, key: str, defaults: Defaults,
                named_by_key: bool) -> HostEntry:
    m = c.mapping(raw, line, key, _HOST_KEYS)
    if named_by_key and "name" in m:
        c.fail(m.key_lines["name"], join_key(key, "name"),
               "the host's name is its key under `hosts:`; remove `name` here")
    remote_code = c.get(m, "remote_code", key, c.boolean, defaults.remote_code)
    remote_code_set = defaults.remote_code_set or "remote_code" in m
    venvs: list[VenvEntry] = []
    raw_venvs = m.get("venvs")
    if raw_venvs is not None:
        vline = m.key_lines["venvs"]
        if not isinstance(raw_venvs, MarkedSeq):
            c.fail(vline, join_key(key, "venvs"), f"expected a list of venvs, got {kind_of(raw_venvs)}")
        seen: dict[str, int] = {}
        for i, item in enumerate(raw_venvs):
            vkey = f"{key}.venvs[{i}]"
            venv = _parse_venv(c, item, raw_venvs.item_lines[i], vkey, remote_code, remote_code_set)
            if venv.path in seen:
                c.fail(raw_venvs.item_lines[i], vkey,
                       f"duplicate venv path {venv.path!r} (first listed as venvs[{seen[venv.path]}])")
            seen[venv.path] = i
            venvs.append(venv)
    if "url" in m and "address" in m:
        c.fail(m.key_lines.get("url"), join_key(key, "url"), "give either `url:` or `address:`, not both")
    return HostEntry(
        name=name,
        # Omitted address: the name itself is the destination (typically an ssh-config alias).
        address=c.get(m, "address", key, c.address) or _name_as_address(c, name, m, line, key),
        url=c.get(m, "url", key, c.url),
        port=c.get(m, "port", key, c.port, defaults.port),
        user=c.get(m, "user", key, c.user, defaults.user),
        identity=c.get(m, "identity", key, c.string, defaults.identity),
        passphrase_env=c.get(m, "passphrase_env", key, c.env_name, defaults.passphrase_env),
        jump=c.get(m, "jump", key, c.jump),
        tags=c.get(m, "tags", key, lambda v, ln, k: c.str_list(v, ln, k, c.pattern(TAG_RE, "tag")), ()),
        venvs=tuple(venvs),
        remote_code=remote_code,
        remote_code_set=remote_code_set,
        roots=c.get(m, "roots", key, lambda v, ln, k: c.str_list(v, ln, k, c.remote_path), ()),
        python=c.get(m, "python", key, c.remote_path),
        line=line,
    )


def _name_as_address(c: Checker, name: str, m: MarkedMap, line: int, key: str) -> str:
    """Without ``address:`` the name itself is the destination (an ssh_config alias, or
    ``[user@]host[:port]``), checked as one; with ``url:`` the URL is."""
    return name if "url" in m else c.destination(name, line, key)


def parse_inventory(text: str, source: str = "<string>") -> Inventory:
    """Validate inventory text; ``source`` is the file name used in messages."""
    from introspect.inventory.marked_yaml import load_marked_yaml  # PyYAML only when text is read

    return parse_inventory_data(load_marked_yaml(text, source), source)


def parse_inventory_data(data: Any, source: str, checker: Checker | None = None) -> Inventory:
    """Validate an inventory already read into marked mappings (hosts.yaml, or an Ansible
    inventory translated to the same shape with the lines of its own files; its
    ``checker`` then names the file each value came from)."""
    c = checker or Checker(source)
    if data is None:
        c.fail(None, "", "the inventory is empty; it needs at least a `hosts:` mapping")
    top = c.mapping(data, 1, "", _TOP_KEYS)
    defaults = _parse_defaults(c, top.get("defaults"), top.key_lines.get("defaults"))

    raw_hosts = top.get("hosts")
    hline = top.key_lines.get("hosts", top.line)
    if not raw_hosts:
        c.fail(hline, "hosts", "no hosts: list at least one host under `hosts:`")
    hosts: list[HostEntry] = []
    if isinstance(raw_hosts, MarkedMap):
        c.no_duplicates(raw_hosts, "hosts", "host")
        for name, raw in raw_hosts.items():
            line = raw_hosts.key_lines[name]
            key = f"hosts.{name}"
            c.pattern(HOST_NAME_RE, "host name")(name, line, key)
            host = _parse_host(c, name, raw, line, key, defaults, named_by_key=True)
            hosts.append(host)
    elif isinstance(raw_hosts, MarkedSeq):
        first_line: dict[str, int] = {}
        for i, raw in enumerate(raw_hosts):
            line, key = raw_hosts.item_lines[i], f"hosts[{i}]"
            if not isinstance(raw, MarkedMap) or raw.get("name") is None:
                c.fail(line, key, "each host in a list needs a `name:`")
            name = c.pattern(HOST_NAME_RE, "host name")(raw["name"], raw.key_lines["name"], f"{key}.name")
            if name in first_line:
                c.fail(raw.key_lines["name"], f"{key}.name",
                       f"duplicate host name {name!r} (first defined on line {first_line[name]})")
            first_line[name] = raw.key_lines["name"]
            host = _parse_host(c, name, raw, line, key, defaults, named_by_key=False)
            hosts.append(host)
    else:
        c.fail(hline, "hosts", f"expected a mapping of name -> host (or a list), got {kind_of(raw_hosts)}")
    return Inventory(defaults=defaults, hosts=tuple(hosts), source=source)


def load_inventory(path: str | Path) -> Inventory:
    """Read and validate ``path``; every problem is an :class:`InventoryError`."""
    source = str(path)
    try:
        p = Path(path).expanduser()
        size = p.stat().st_size
        if size > MAX_INVENTORY_BYTES:
            raise InventoryError(f"{size} bytes is above the {MAX_INVENTORY_BYTES}-byte cap for an inventory",
                                 source=source)
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise InventoryError(f"cannot read the inventory: {exc.strerror or exc}", source=source) from None
    except UnicodeDecodeError as exc:
        raise InventoryError(f"not UTF-8 (byte {exc.start})", source=source) from None
    return parse_inventory(text, source)


def _split(values: Iterable[str]) -> list[str]:
    # CLI flags may repeat (--tags a --tags b) or use commas (--tags a,b); accept both.
    return [part.strip() for v in values for part in v.split(",") if part.strip()]


def select_hosts(inv: Inventory, only: Iterable[str] = (), tags: Iterable[str] = ()) -> list[HostEntry]:
    """Hosts named in ``only`` (all if empty) that carry at least one of ``tags`` (any if empty).

    Inventory order is kept. An unknown name, or a selection matching nothing, is a
    usage error: a cron job that silently checks zero hosts would always look healthy.
    """
    names, wanted_tags = _split(only), set(_split(tags))
    known = {h.name for h in inv.hosts}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise InventoryError(
            f"no host named {', '.join(map(repr, unknown))} (hosts: {', '.join(sorted(known))})",
            source=inv.source,
        )
    chosen = [
        h for h in inv.hosts
        if (not names or h.name in names) and (not wanted_tags or wanted_tags & set(h.tags))
    ]
    if not chosen:
        all_tags = sorted({t for h in inv.hosts for t in h.tags})
        raise InventoryError(
            f"no host matches --only {names or '(any)'} and --tags {sorted(wanted_tags) or '(any)'} "
            f"(tags in use: {', '.join(all_tags) or 'none'})",
            source=inv.source,
        )
    return chosen
