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
    remote_code: false               # default trust_remote_code where no inventory says

Relative paths are relative to the config file's directory.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from introspect.errors import UsageError

if TYPE_CHECKING:  # no yaml import for a local probe
    from introspect.inventory import HostEntry, Inventory

CONFIG_ENV = "INTROSPECT_CONFIG"
HOSTS_ENV = "INTROSPECT_HOSTS"
CONFIG_KEYS = ("hosts", "inventory", "remote_code")
MAX_CONFIG_BYTES = 64 * 1024


@dataclass(frozen=True)
class Chosen:
    """A setting's value and where it came from: ``source`` is flag, env, config, inventory or
    default; ``where`` names the flag, variable or file (and key)."""

    value: Any
    source: str
    where: str

    def as_dict(self) -> dict[str, Any]:
        return {"value": self.value, "source": self.source, "where": self.where}


@dataclass(frozen=True)
class UserConfig:
    path: Path
    exists: bool = False
    hosts: str | None = None
    inventory: str | None = None
    remote_code: bool | None = None


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
        raise _bad(path, "must be a mapping of settings (hosts:, inventory:, remote_code:)")
    unknown = sorted(str(k) for k in data if k not in CONFIG_KEYS)
    if unknown:
        raise _bad(path, f"unknown key(s) {', '.join(unknown)} (known: {', '.join(CONFIG_KEYS)})")
    remote_code = data.get("remote_code")
    if remote_code is not None and not isinstance(remote_code, bool):
        raise _bad(path, f"remote_code must be true or false, not {remote_code!r}")
    return UserConfig(path, exists=True, hosts=_path_value(path, data, "hosts"),
                      inventory=_path_value(path, data, "inventory"), remote_code=remote_code)


def _path_value(config: Path, data: dict[str, Any], key: str) -> str | None:
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise _bad(config, f"{key} must be a file path, not {value!r}")
    target = Path(value).expanduser()
    return str(target if target.is_absolute() else config.parent / target)


def _bad(path: Path, problem: str) -> UsageError:
    return UsageError(f"config file {path} {problem}",
                      hint=f"fix or remove {path} (or point ${CONFIG_ENV} at another file)")


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


def choose_remote_code(no_remote_code: bool, inventory: Chosen | None = None) -> Chosen:
    """Whether the model's own code may run (trust_remote_code), and who said so:
    ``--no-remote-code`` > the inventory's entry > the user config's ``remote_code:`` >
    the built-in default (allowed, as transformers needs it for custom tokenizers)."""
    if no_remote_code:
        return Chosen(False, "flag", "--no-remote-code")
    if inventory is not None:
        return inventory
    config = user_config()
    if config.remote_code is not None:
        return Chosen(config.remote_code, "config", f"{config.path}: remote_code")
    return Chosen(True, "default", "built-in default (pass --no-remote-code to refuse)")


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


def settings_block(inventory: Inventory | None, remote_code: Chosen) -> dict[str, Any]:
    """Which inventory and which remote-code policy a run used, and who chose each (the
    ``settings`` block of a profile or a preflight report)."""
    chosen = inventory.chosen if inventory is not None else None
    return {"inventory": None if inventory is None else {"path": inventory.source,
                                                          "source": chosen.source if chosen else "flag",
                                                          "where": chosen.where if chosen else "--hosts"},
            "remote_code": remote_code.as_dict()}


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
