"""The user's config file, and where each setting of a run came from.

Settings come in named layers (invoke's config levels): a flag, then an environment
variable, then the user config file, then the built-in default. Nothing is read from
the working directory: a ``./hosts.yaml`` lying there never changes what a command
does (``ansible`` reads ``./ansible.cfg`` implicitly, and its docs warn about exactly
that on shared machines).

The file is YAML at ``$INTROSPECT_CONFIG``, else ``user_config_dir("introspect")/config.yaml``
(platformdirs: ``~/.config/introspect/config.yaml`` on Linux)::

    hosts: ~/fleet/hosts.yaml        # the default inventory (hosts.yaml format)
    inventory: ~/ansible/inventory   # or: an inventory file, read by the same loader
    transport: openssh               # the scheme of a bare host name (default ssh = paramiko)
    known_hosts: ~/.ssh/fleet_known_hosts  # host keys (default: ssh_config's, ~/.ssh/known_hosts)
    parallel: 16                     # hosts at once in fleet runs (an inventory's own wins)
    venv: /opt/venvs/serve           # venv on the hosts where neither --venv nor the inventory says
    remote_code: false               # or a policy per model / host pattern (userconfig_policy)

Relative paths (hosts, inventory, known_hosts) are relative to the config file's directory.
``introspect init`` writes a starter file; ``introspect env`` shows where each setting came from.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from introspect.errors import UsageError
from introspect.userconfig_policy import (
    ConfigProblem,
    RemoteCodePolicy,
    parse_parallel,
    parse_remote_code,
    parse_transport,
    parse_venv,
)

if TYPE_CHECKING:  # no yaml import for a local probe
    from introspect.documents.profile import Settings
    from introspect.inventory import HostEntry, Inventory
    from introspect.transport.base import Target

CONFIG_ENV = "INTROSPECT_CONFIG"
HOSTS_ENV = "INTROSPECT_HOSTS"
CONFIG_KEYS = ("hosts", "inventory", "transport", "known_hosts", "parallel", "venv", "remote_code")
MAX_CONFIG_BYTES = 64 * 1024


class ChosenJSON(TypedDict):
    """A :class:`Chosen` as ``introspect env --json`` prints it (a setting's value is any YAML scalar)."""

    value: object
    source: str
    where: str


@dataclass(frozen=True)
class Chosen:
    """A setting's value and where it came from: ``source`` is flag, env, config, inventory or
    default; ``where`` names the flag, variable or file (and key)."""

    value: Any
    source: str
    where: str

    def as_dict(self) -> ChosenJSON:
        return {"value": self.value, "source": self.source, "where": self.where}


@dataclass(frozen=True)
class UserConfig:
    path: Path
    exists: bool = False
    hosts: str | None = None
    inventory: str | None = None
    transport: str | None = None
    known_hosts: str | None = None
    parallel: int | None = None
    venv: str | None = None
    policy: RemoteCodePolicy = RemoteCodePolicy()

    @property
    def remote_code(self) -> bool | None:
        """The config's default for running the model's own code (None: it says nothing)."""
        return self.policy.default


def config_path() -> Path:
    override = os.environ.get(CONFIG_ENV)
    if override:
        return Path(override).expanduser()
    return user_dir("config") / "config.yaml"


# The XDG base directory each kind of platformdirs directory comes from on Linux, and the
# spec's default when the variable is unset or unusable
# (https://specifications.freedesktop.org/basedir-spec/latest/#variables).
XDG_DIRS = {"config": ("XDG_CONFIG_HOME", "~/.config"), "cache": ("XDG_CACHE_HOME", "~/.cache"),
            "state": ("XDG_STATE_HOME", "~/.local/state"), "data": ("XDG_DATA_HOME", "~/.local/share")}
_DIR_WARNINGS: dict[str, tuple[str, str]] = {}


def user_dir(kind: str) -> Path:
    """introspect's ``kind`` directory (config, cache, state, data) from platformdirs; when its
    XDG variable names something that cannot hold a directory (a regular file, a relative
    path), the spec's default instead, with a warning (:func:`dir_warnings`) naming the
    variable: one bad variable must not fail every command."""
    import platformdirs  # only when a default directory is needed

    path = Path(getattr(platformdirs, f"user_{kind}_dir")("introspect"))
    variable, default = XDG_DIRS[kind]
    value = os.environ.get(variable, "")
    if not value.strip() or path.parent != Path(value):
        return path  # unset, or not where this platform's directory comes from (macOS, Windows)
    problem = _unusable_base(Path(value))
    if problem is None:
        return path
    fallback = Path(default).expanduser() / "introspect"
    _DIR_WARNINGS[variable] = (f"${variable} ({value}) {problem}; using {fallback} instead",
                               f"unset {variable}  # or point it at a directory")
    return fallback


def _unusable_base(base: Path) -> str | None:
    # The XDG spec: "If an implementation encounters a relative path in any of these variables
    # it should consider the path invalid and ignore it."
    if not base.is_absolute():
        return "is not an absolute path"
    for part in (base, *base.parents):
        if part.is_dir():
            return None
        if part.exists() or part.is_symlink():
            what = "a file, not a directory" if part.exists() else "a dangling link"
            return f"cannot hold a directory: {part} is {what}"
    return None


def dir_warnings() -> list[tuple[str, str]]:
    """(warning, fix) for each XDG variable :func:`user_dir` had to pass over since the last call."""
    found = list(_DIR_WARNINGS.values())
    _DIR_WARNINGS.clear()
    return found


def user_config() -> UserConfig:
    """The user config file of this process (read once per path)."""
    return _load(str(config_path()))


@functools.lru_cache(maxsize=4)
def _load(path_text: str) -> UserConfig:
    path = Path(path_text)
    try:
        if path.stat().st_size > MAX_CONFIG_BYTES:
            raise _bad(path, f"above {MAX_CONFIG_BYTES} bytes; a config file is a few lines")
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return UserConfig(path)
    except (OSError, UnicodeDecodeError) as exc:
        raise _bad(path, f"cannot be read: {getattr(exc, 'strerror', None) or exc}") from None
    return _parse(path, text)


def _parse(path: Path, text: str) -> UserConfig:
    import yaml  # only when a config file exists

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise _bad(path, f"is not valid YAML ({exc})".replace("\n", " ")) from None
    if data is None:
        return UserConfig(path, exists=True)
    if not isinstance(data, dict):
        raise _bad(path, f"must be a mapping of settings ({', '.join(f'{k}:' for k in CONFIG_KEYS)})")
    unknown = sorted(str(k) for k in data if k not in CONFIG_KEYS)
    if unknown:
        raise _bad(path, f"unknown key(s) {', '.join(unknown)} (known: {', '.join(CONFIG_KEYS)})",
                   key=unknown[0])
    try:
        return UserConfig(path, exists=True, hosts=_path_value(path, data, "hosts"),
                          inventory=_path_value(path, data, "inventory"),
                          known_hosts=_path_value(path, data, "known_hosts"),
                          transport=parse_transport(data.get("transport")),
                          parallel=parse_parallel(data.get("parallel")), venv=parse_venv(data.get("venv")),
                          policy=parse_remote_code(data.get("remote_code")))
    except ConfigProblem as exc:
        raise _bad(path, exc.problem, key=exc.key) from None


def _path_value(config: Path, data: Mapping[object, object], key: str) -> str | None:
    """A path setting of the config file (YAML as read: a user's file)."""
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ConfigProblem(key, f"must be a file path, not {value!r}")
    target = Path(value).expanduser()
    return str(target if target.is_absolute() else config.parent / target)


def _bad(path: Path, problem: str, key: str | None = None) -> UsageError:
    """``config file PATH: KEY: problem``, and an editor command on that file as the fix (with
    ``introspect init --print`` to see every key written out with its comment)."""
    where = f"{path}: {key}:" if key else f"{path}"
    return UsageError(f"config file {where} {problem}",
                      hint=f"${{EDITOR:-vi}} {shlex.quote(str(path))}  # fix {key or 'the file'}; "
                           "`introspect init --print` shows every key")


def choose_inventory(flag: str | None, flag_name: str = "--hosts") -> Chosen | None:
    """The inventory file of a run: ``flag``, else ``$INTROSPECT_HOSTS``, else the user config's
    ``hosts:`` or ``inventory:``; None when none names one."""
    if flag:
        return Chosen(flag, "flag", flag_name)
    env = os.environ.get(HOSTS_ENV)
    if env:
        return Chosen(os.path.expanduser(env), "env", HOSTS_ENV)
    config = user_config()
    for key in ("hosts", "inventory"):
        value = getattr(config, key)
        if value:
            return Chosen(value, "config", f"{config.path}: {key}")
    return None


def choose_remote_code(no_remote_code: bool, inventory: Chosen | None = None, *,
                       hosts: tuple[str | None, ...] = (), model: str | None = None) -> Chosen:
    """Whether the model's own code may run (trust_remote_code), and who said so:
    ``--no-remote-code`` > the inventory's entry > the user config's ``remote_code``
    pattern for ``model``, then for any of ``hosts`` (names, addresses), then its default >
    the built-in default (allowed, as transformers needs it for custom tokenizers).
    The order and the rule among patterns: :mod:`introspect.userconfig_policy`."""
    if no_remote_code:
        return Chosen(False, "flag", "--no-remote-code")
    if inventory is not None:
        return inventory
    config = user_config()
    matched = config.policy.match([name for name in hosts if name], model)
    if matched is not None:
        return Chosen(matched[0], "config", f"{config.path}: {matched[1]}")
    if config.policy.default is not None:
        return Chosen(config.policy.default, "config", f"{config.path}: {config.policy.default_key}")
    return Chosen(True, "default", "built-in default (pass --no-remote-code to refuse)")


def choose_config(key: str, flag: Any = None, flag_name: str = "", default: Any = None) -> Chosen:
    """``transport``, ``known_hosts``, ``parallel`` or ``venv`` of a run: the flag, else the
    user config's key, else ``default`` (an inventory's own value is applied by its reader
    before this is asked: see :func:`config_parallel`)."""
    if flag not in (None, "", ()):
        return Chosen(flag, "flag", flag_name)
    config = user_config()
    value = getattr(config, key)
    if value is not None:
        return Chosen(value, "config", f"{config.path}: {key}")
    return Chosen(default, "default", "built-in default")


def config_settings() -> dict[str, Chosen]:
    """Each setting a run would take from the user config or the built-in defaults, and where
    from (``introspect env``): flags and the inventory can still override each, per run."""
    config = user_config()
    chosen = {"inventory": choose_inventory(None) or Chosen(None, "default", "none: pass --hosts FILE"),
              "transport": choose_config("transport", default="ssh"),
              "known_hosts": choose_config("known_hosts", default="ssh_config's, else ~/.ssh/known_hosts"),
              "parallel": choose_config("parallel", default=8),
              "venv": choose_config("venv", default="the inventory's first venv, else python3"),
              "remote_code": choose_remote_code(False)}
    for kind, patterns in (("models", config.policy.models), ("hosts", config.policy.hosts)):
        for pattern, allowed in patterns:
            key = f'remote_code.{kind}["{pattern}"]'
            chosen[key] = Chosen(allowed, "config", f"{config.path}: {key}")
    return chosen


def config_venv(target: Target) -> str | None:
    """The user config's ``venv:`` for a remote target (where neither ``--venv``, ``--python``
    nor the inventory named one); never for a local run, whose own interpreter is the default."""
    return None if target.scheme == "local" else user_config().venv


def target_names(target: Target, entry: HostEntry | None) -> tuple[str | None, ...]:
    """What a ``remote_code.hosts`` pattern is matched against: the inventory name and address,
    and the host the transport was given (``--host``)."""
    return (entry.name if entry else None, entry.address if entry else None, target.host)


def config_parallel(inventory: Inventory) -> Inventory:
    """``inventory`` with the user config's ``parallel`` where the inventory sets none."""
    config = user_config()
    if config.parallel is None or inventory.defaults.parallel_set:
        return inventory
    from dataclasses import replace

    return replace(inventory, defaults=replace(inventory.defaults, parallel=config.parallel))


def inventory_remote_code(inventory: Inventory | None, entry: HostEntry | None, venv: str | None) -> Chosen | None:
    """What the inventory says about running the model's own code for ``entry`` (and ``venv``),
    or None when it says nothing (then the user config or the built-in default applies)."""
    if inventory is None or entry is None:
        return None
    for item in entry.venvs:
        if item.path == venv and item.remote_code_set:
            return Chosen(item.remote_code, "inventory", f"{inventory.source}: {entry.name} venv {item.path}")
    if entry.remote_code_set:
        return Chosen(entry.remote_code, "inventory", f"{inventory.source}: {entry.name}")
    return None


def settings_block(inventory: Inventory | None, remote_code: Chosen) -> Settings:
    """Which inventory and which remote-code policy a run used, and who chose each (the
    ``settings`` block of a profile or a preflight report)."""
    from introspect.documents import profile as documents  # pydantic: once a run has a result

    chosen = inventory.chosen if inventory is not None else None
    choice = None if inventory is None else documents.InventoryChoice(
        path=inventory.source, source=chosen.source if chosen else "flag", where=chosen.where if chosen else "--hosts")
    return documents.Settings(inventory=choice, remote_code=documents.Chosen(
        value=remote_code.value, source=remote_code.source, where=remote_code.where))


def make_private_dirs(root: Path) -> None:
    """``root`` and its missing parents, each created 0700 (an existing directory is left as it is):
    the result cache and the history database both hold the fleet's hosts, paths and packages.
    (``Path.mkdir(parents=True, mode=...)`` gives the mode to the last directory only.)"""
    missing = []
    here = root
    while not os.path.lexists(here) and here != here.parent:
        missing.append(here)
        here = here.parent
    for directory in reversed(missing):
        with contextlib.suppress(FileExistsError):  # made meanwhile by a parallel run
            os.mkdir(directory, 0o700)
    if not root.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, "not a directory", str(root))
