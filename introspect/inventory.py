"""Load and validate the fleet inventory, ``hosts.yaml`` (issue 4).

The inventory is read once, validated strictly and turned into frozen dataclasses;
everything downstream (transport, checks, history) works on those values only
(architecture point 12: validate once, then pass values as data).

Why strict: a typo such as ``adress:`` or ``require:`` would otherwise be ignored and
a health check would pass while checking nothing. So every unknown key, wrong type,
duplicate key and unparsable requirement is an error naming file, line and key.

Why no secrets: the file is shared and committed; passwords belong in ssh-agent,
key files, or environment variables that the file *names* (``passphrase_env``).

Layering (architecture point 13, "CLI flags > host entry > defaults"): ``port``,
``user``, ``identity``, ``passphrase_env`` fall back to ``defaults`` at load time and
may stay ``None``, which means "whatever ~/.ssh/config or OpenSSH would use", so an
ssh-config alias keeps its own settings. ``remote_code`` resolves venv > host >
defaults to a plain bool. CLI flags are applied later by the command.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import yaml
from packaging.requirements import InvalidRequirement, Requirement

MAX_INVENTORY_BYTES = 1024 * 1024  # issue 6: bounded input; a real inventory is a few KiB


class InventoryError(Exception):
    """Invalid inventory or host selection; the CLI maps it to exit status 2."""

    exit_code = 2

    def __init__(self, message: str, *, source: str | None = None, line: int | None = None,
                 key: str | None = None) -> None:
        self.source = source
        self.line = line
        self.key = key
        self.detail = message
        where = ""
        if source is not None:
            where = source if line is None else f"{source}:{line}"
        prefix = ": ".join(p for p in (where, key) if p)
        super().__init__(f"{prefix}: {message}" if prefix else message)


# --------------------------------------------------------------------------- data


@dataclass(frozen=True)
class Defaults:
    user: str | None = None
    port: int | None = None
    identity: str | None = None
    passphrase_env: str | None = None
    connect_timeout: float = 5.0  # issue 6: connect 5 s by default
    parallel: int = 8
    known_hosts: str | None = None  # None: the user's ~/.ssh/known_hosts
    # On by default because the CLI opt-out is --no-remote-code (issue 6); hosts.yaml
    # can switch it off per host or venv.
    remote_code: bool = True
    probe_timeout: float = 120.0  # seconds for one host's probe run (tokenizer loads included)


@dataclass(frozen=True)
class VenvEntry:
    path: str
    requires: tuple[str, ...] = ()
    imports: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    remote_code: bool = True
    min_free_gb: float | None = None  # GiB (2**30 bytes), as `df -h` shows

    @property
    def python(self) -> str:
        return f"{self.path}/bin/python"

    @property
    def pip(self) -> str:
        return f"{self.path}/bin/pip"


@dataclass(frozen=True)
class HostEntry:
    name: str
    address: str
    port: int | None = None
    user: str | None = None
    identity: str | None = None
    jump: str | None = None
    tags: tuple[str, ...] = ()
    venvs: tuple[VenvEntry, ...] = ()
    remote_code: bool = True
    roots: tuple[str, ...] = ()
    passphrase_env: str | None = None
    line: int = field(default=0, compare=False)  # where the entry starts, for later messages


@dataclass(frozen=True)
class Inventory:
    defaults: Defaults
    hosts: tuple[HostEntry, ...]
    source: str = "<string>"

    def host(self, name: str) -> HostEntry:
        for entry in self.hosts:
            if entry.name == name:
                return entry
        raise InventoryError(f"no host named {name!r}", source=self.source)


# --------------------------------------------------------------- YAML with line marks


class _Map(dict):
    """A mapping that remembers the line of each key (PyYAML node marks, 1-based)."""

    line: int
    key_lines: dict[str, int]
    duplicates: list[tuple[str, int, int]]  # (key, line, line of its first definition)


class _Seq(list):
    line: int
    item_lines: list[int]


class _Loader(yaml.SafeLoader):
    source = "<string>"


def _construct_map(loader: _Loader, node: yaml.MappingNode) -> _Map:
    # Duplicates are checked on the raw node before merge keys (<<) are flattened:
    # an explicit key overriding a merged one is legal YAML, a repeated key is not.
    # Plain yaml.safe_load keeps the last duplicate silently.
    seen: dict[Any, int] = {}
    duplicates: list[tuple[str, int, int]] = []
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue
        key = loader.construct_object(key_node, deep=True)
        line = key_node.start_mark.line + 1
        if not isinstance(key, str):
            raise InventoryError(f"keys must be strings, got {type(key).__name__} {key!r}",
                                 source=loader.source, line=line, key=str(key))
        if key in seen:
            # Reported by the validator, which knows the full key path (hosts.gpu-a...).
            duplicates.append((key, line, seen[key]))
        else:
            seen[key] = line
    loader.flatten_mapping(node)
    out = _Map()
    out.line = node.start_mark.line + 1
    out.key_lines = {}
    out.duplicates = duplicates
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        out[key] = loader.construct_object(value_node, deep=True)
        out.key_lines[key] = key_node.start_mark.line + 1
    return out


def _construct_seq(loader: _Loader, node: yaml.SequenceNode) -> _Seq:
    out = _Seq(loader.construct_object(child, deep=True) for child in node.value)
    out.line = node.start_mark.line + 1
    out.item_lines = [child.start_mark.line + 1 for child in node.value]
    return out


_Loader.add_constructor("tag:yaml.org,2002:map", _construct_map)
_Loader.add_constructor("tag:yaml.org,2002:seq", _construct_seq)


def _load_yaml(text: str, source: str) -> Any:
    loader = _Loader(text)
    loader.source = source
    try:
        return loader.get_single_data()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        raise InventoryError(f"invalid YAML: {exc.problem or exc}", source=source, line=line) from None
    except yaml.YAMLError as exc:
        raise InventoryError(f"invalid YAML: {exc}", source=source) from None
    finally:
        loader.dispose()


# ------------------------------------------------------------------------ validation

_SECRET_WORDS = ("password", "passwd", "passphrase", "secret", "token")
_SECRET_HINT = (
    "secrets are not accepted in the inventory; use ssh-agent or an identity key file "
    "(identity: ~/.ssh/id_ed25519), and give a key file's passphrase through an "
    "environment variable named by `passphrase_env: VAR_NAME`"
)
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_HOST_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.:@+-]*$")
_TAG = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.:/+-]*$")
_MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
_SSH_WORD = re.compile(r"^[^\s\x00-\x1f\x7f-][^\s\x00-\x1f\x7f]*$")  # no blanks, no leading '-'


class _Checker:
    """Validation helpers that know the file name, so every error names file:line: key."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, line: int | None, key: str, message: str) -> NoReturn:
        raise InventoryError(message, source=self.source, line=line, key=key)

    def mapping(self, value: Any, line: int | None, key: str, allowed: Iterable[str]) -> _Map:
        if value is None:
            value = _Map()
            value.line, value.key_lines, value.duplicates = line or 0, {}, []
        if not isinstance(value, _Map):
            self.fail(line, key, f"expected a mapping, got {_kind(value)}")
        self.no_duplicates(value, key)
        allowed = tuple(allowed)
        for k in value:
            kline = value.key_lines.get(k, value.line)
            lowered = k.lower()
            if any(w in lowered for w in _SECRET_WORDS) and not lowered.endswith("_env"):
                self.fail(kline, _join(key, k), _SECRET_HINT)
            if k not in allowed:
                close = difflib.get_close_matches(k, allowed, n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                self.fail(kline, _join(key, k), f"unknown key (allowed: {', '.join(allowed)}){hint}")
        return value

    def no_duplicates(self, m: _Map, key: str, what: str = "key") -> None:
        # Plain yaml.safe_load keeps the last of two equal keys silently; a host or
        # setting listed twice is almost always a copy-paste mistake.
        for dup, line, first in m.duplicates:
            self.fail(line, _join(key, dup), f"duplicate {what} {dup!r} (first defined on line {first})")

    def get(self, m: _Map, name: str, key: str, convert: Callable[[Any, int, str], Any],
            default: Any = None) -> Any:
        if name not in m or m[name] is None:
            return default
        return convert(m[name], m.key_lines.get(name, m.line), _join(key, name))

    # scalar converters: (value, line, key) -> value
    def string(self, v: Any, line: int, key: str) -> str:
        if not isinstance(v, str) or not v.strip():
            self.fail(line, key, f"expected a non-empty string, got {_kind(v)}")
        if "-----BEGIN" in v:
            self.fail(line, key, _SECRET_HINT)
        return v

    def ssh_word(self, v: Any, line: int, key: str) -> str:
        # These reach ssh as destinations/options: a leading '-' would be read as an
        # option, blanks and control characters are never valid there.
        v = self.string(v, line, key)
        if not _SSH_WORD.match(v):
            self.fail(line, key, f"{v!r} must not start with '-' or contain blanks or control characters")
        return v

    def address(self, v: Any, line: int, key: str) -> str:
        v = self.ssh_word(v, line, key)
        if "@" in v:
            self.fail(line, key, f"{v!r}: put the user in `user:`, not in the address")
        return v

    def integer(self, v: Any, line: int, key: str, lo: int, hi: int) -> int:
        if isinstance(v, bool) or not isinstance(v, int):
            self.fail(line, key, f"expected an integer, got {_kind(v)}")
        if not lo <= v <= hi:
            self.fail(line, key, f"{v} is out of range {lo}..{hi}")
        return v

    def port(self, v: Any, line: int, key: str) -> int:
        return self.integer(v, line, key, 1, 65535)

    def number(self, v: Any, line: int, key: str, positive: bool = True) -> float:
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            self.fail(line, key, f"expected a number, got {_kind(v)}")
        if v < 0 or (positive and v == 0) or v != v:
            self.fail(line, key, f"{v} must be {'positive' if positive else 'zero or more'}")
        return float(v)

    def boolean(self, v: Any, line: int, key: str) -> bool:
        if not isinstance(v, bool):
            self.fail(line, key, f"expected true or false, got {_kind(v)}")
        return v

    def env_name(self, v: Any, line: int, key: str) -> str:
        v = self.string(v, line, key)
        if not _ENV_NAME.match(v):
            self.fail(line, key, f"{v!r} is not an environment variable name; give the variable's NAME, "
                                 "never the secret itself")
        return v

    def remote_path(self, v: Any, line: int, key: str) -> str:
        v = self.string(v, line, key)
        if "\x00" in v:
            self.fail(line, key, "a path cannot contain a NUL byte")
        if not v.startswith("/"):
            # Paths travel to the host as data, never through a shell, so ~ and $VARS
            # are not expanded there.
            self.fail(line, key, f"{v!r} must be an absolute path on the host")
        return v.rstrip("/") or "/"

    def str_list(self, v: Any, line: int, key: str, item: Callable[[Any, int, str], str]) -> tuple[str, ...]:
        if not isinstance(v, _Seq):
            self.fail(line, key, f"expected a list, got {_kind(v)}")
        return tuple(item(x, v.item_lines[i], f"{key}[{i}]") for i, x in enumerate(v))

    def pattern(self, regex: re.Pattern[str], what: str) -> Callable[[Any, int, str], str]:
        def convert(v: Any, line: int, key: str) -> str:
            v = self.string(v, line, key)
            if not regex.match(v):
                self.fail(line, key, f"{v!r} is not a valid {what}")
            return v

        return convert

    def requirement(self, v: Any, line: int, key: str) -> str:
        v = self.string(v, line, key)
        try:
            Requirement(v)
        except InvalidRequirement as exc:
            first = str(exc).splitlines()[0]
            self.fail(line, key, f"invalid requirement {v!r} ({first}); write PEP 508, e.g. 'transformers>=4.57'")
        return v


def _join(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


def _kind(v: Any) -> str:
    if v is None:
        return "nothing"
    if isinstance(v, bool):
        return f"boolean {v}"
    if isinstance(v, (_Map, dict)):
        return "a mapping"
    if isinstance(v, (_Seq, list)):
        return "a list"
    return f"{type(v).__name__} {v!r}"


_TOP_KEYS = ("defaults", "hosts")
_DEFAULT_KEYS = ("user", "port", "identity", "passphrase_env", "connect_timeout", "parallel",
                 "known_hosts", "remote_code", "probe_timeout")
_HOST_KEYS = ("name", "address", "port", "user", "identity", "passphrase_env", "jump", "tags",
              "remote_code", "roots", "venvs")
_VENV_KEYS = ("path", "requires", "imports", "models", "remote_code", "min_free_gb")


def _parse_defaults(c: _Checker, raw: Any, line: int | None) -> Defaults:
    m = c.mapping(raw, line, "defaults", _DEFAULT_KEYS)
    d = Defaults()
    return Defaults(
        user=c.get(m, "user", "defaults", c.ssh_word),
        port=c.get(m, "port", "defaults", c.port),
        identity=c.get(m, "identity", "defaults", c.string),
        passphrase_env=c.get(m, "passphrase_env", "defaults", c.env_name),
        connect_timeout=c.get(m, "connect_timeout", "defaults", c.number, d.connect_timeout),
        parallel=c.get(m, "parallel", "defaults",
                       lambda v, ln, k: c.integer(v, ln, k, 1, 1024), d.parallel),
        known_hosts=c.get(m, "known_hosts", "defaults", c.string),
        remote_code=c.get(m, "remote_code", "defaults", c.boolean, d.remote_code),
        probe_timeout=c.get(m, "probe_timeout", "defaults", c.number, d.probe_timeout),
    )


def _parse_venv(c: _Checker, raw: Any, line: int, key: str, inherited_remote_code: bool) -> VenvEntry:
    m = c.mapping(raw, line, key, _VENV_KEYS)
    if "path" not in m or m["path"] is None:
        c.fail(m.line, key, "missing required key 'path' (the venv directory, e.g. /opt/venvs/serve)")
    return VenvEntry(
        path=c.get(m, "path", key, c.remote_path),
        requires=c.get(m, "requires", key, lambda v, ln, k: c.str_list(v, ln, k, c.requirement), ()),
        imports=c.get(m, "imports", key,
                      lambda v, ln, k: c.str_list(v, ln, k, c.pattern(_MODULE, "module name")), ()),
        models=c.get(m, "models", key, lambda v, ln, k: c.str_list(v, ln, k, c.remote_path), ()),
        remote_code=c.get(m, "remote_code", key, c.boolean, inherited_remote_code),
        min_free_gb=c.get(m, "min_free_gb", key, lambda v, ln, k: c.number(v, ln, k, positive=False)),
    )


def _parse_host(c: _Checker, name: str, raw: Any, line: int, key: str, defaults: Defaults,
                named_by_key: bool) -> HostEntry:
    m = c.mapping(raw, line, key, _HOST_KEYS)
    if named_by_key and "name" in m:
        c.fail(m.key_lines["name"], _join(key, "name"),
               "the host's name is its key under `hosts:`; remove `name` here")
    remote_code = c.get(m, "remote_code", key, c.boolean, defaults.remote_code)
    venvs: list[VenvEntry] = []
    raw_venvs = m.get("venvs")
    if raw_venvs is not None:
        vline = m.key_lines["venvs"]
        if not isinstance(raw_venvs, _Seq):
            c.fail(vline, _join(key, "venvs"), f"expected a list of venvs, got {_kind(raw_venvs)}")
        seen: dict[str, int] = {}
        for i, item in enumerate(raw_venvs):
            vkey = f"{key}.venvs[{i}]"
            venv = _parse_venv(c, item, raw_venvs.item_lines[i], vkey, remote_code)
            if venv.path in seen:
                c.fail(raw_venvs.item_lines[i], vkey,
                       f"duplicate venv path {venv.path!r} (first listed as venvs[{seen[venv.path]}])")
            seen[venv.path] = i
            venvs.append(venv)
    return HostEntry(
        name=name,
        # Omitted address: the name itself is the destination (typically an ssh-config alias).
        address=c.get(m, "address", key, c.address, name),
        port=c.get(m, "port", key, c.port, defaults.port),
        user=c.get(m, "user", key, c.ssh_word, defaults.user),
        identity=c.get(m, "identity", key, c.string, defaults.identity),
        passphrase_env=c.get(m, "passphrase_env", key, c.env_name, defaults.passphrase_env),
        jump=c.get(m, "jump", key, c.ssh_word),
        tags=c.get(m, "tags", key, lambda v, ln, k: c.str_list(v, ln, k, c.pattern(_TAG, "tag")), ()),
        venvs=tuple(venvs),
        remote_code=remote_code,
        roots=c.get(m, "roots", key, lambda v, ln, k: c.str_list(v, ln, k, c.remote_path), ()),
        line=line,
    )


def parse_inventory(text: str, source: str = "<string>") -> Inventory:
    """Validate inventory text; ``source`` is the file name used in messages."""
    c = _Checker(source)
    data = _load_yaml(text, source)
    if data is None:
        c.fail(None, "", "the inventory is empty; it needs at least a `hosts:` mapping")
    top = c.mapping(data, 1, "", _TOP_KEYS)
    defaults = _parse_defaults(c, top.get("defaults"), top.key_lines.get("defaults"))

    raw_hosts = top.get("hosts")
    hline = top.key_lines.get("hosts", top.line)
    if not raw_hosts:
        c.fail(hline, "hosts", "no hosts: list at least one host under `hosts:`")
    hosts: list[HostEntry] = []
    if isinstance(raw_hosts, _Map):
        c.no_duplicates(raw_hosts, "hosts", "host")
        for name, raw in raw_hosts.items():
            line = raw_hosts.key_lines[name]
            key = f"hosts.{name}"
            c.pattern(_HOST_NAME, "host name")(name, line, key)
            host = _parse_host(c, name, raw, line, key, defaults, named_by_key=True)
            hosts.append(host)
    elif isinstance(raw_hosts, _Seq):
        first_line: dict[str, int] = {}
        for i, raw in enumerate(raw_hosts):
            line, key = raw_hosts.item_lines[i], f"hosts[{i}]"
            if not isinstance(raw, _Map) or raw.get("name") is None:
                c.fail(line, key, "each host in a list needs a `name:`")
            name = c.pattern(_HOST_NAME, "host name")(raw["name"], raw.key_lines["name"], f"{key}.name")
            if name in first_line:
                c.fail(raw.key_lines["name"], f"{key}.name",
                       f"duplicate host name {name!r} (first defined on line {first_line[name]})")
            first_line[name] = raw.key_lines["name"]
            host = _parse_host(c, name, raw, line, key, defaults, named_by_key=False)
            hosts.append(host)
    else:
        c.fail(hline, "hosts", f"expected a mapping of name -> host (or a list), got {_kind(raw_hosts)}")
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


__all__ = [
    "Defaults",
    "HostEntry",
    "Inventory",
    "InventoryError",
    "VenvEntry",
    "load_inventory",
    "parse_inventory",
    "select_hosts",
]
