"""The user config's typed keys (:mod:`introspect.userconfig` reads the file): the default
transport, known_hosts, parallelism and venv, and the remote-code policy per host or model.

``remote_code`` is a plain bool, or a mapping::

    remote_code:
      default: false                          # where no pattern below matches
      models: {"/root/models/Kimi-*": true}   # fnmatch on the --model path (or id) as given
      hosts: {"gpu-*": true}                  # fnmatch on the inventory name, address or --host

Precedence (each step only where the ones before it said nothing): ``--no-remote-code`` >
the inventory (its venv, host or defaults) > a ``models`` pattern > a ``hosts`` pattern >
``default`` > the built-in default (allowed). Models come before hosts because a model
pattern names the code that would run; a host pattern only names where. Among the patterns
of one list that match, a refusal wins over an allowance, whatever their order: an allowance
for ``/root/models/*`` never overrides ``*/untrusted/*: false``.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

MAX_PARALLEL = 1024  # the inventory's `parallel` allows the same range
POLICY_KEYS = ("default", "models", "hosts")


@dataclass(frozen=True)
class RemoteCodePolicy:
    """``remote_code`` of the config: the default and the patterns, in file order."""

    default: bool | None = None
    default_key: str = "remote_code"  # how the default is named in `where` (a plain bool: remote_code)
    models: tuple[tuple[str, bool], ...] = ()
    hosts: tuple[tuple[str, bool], ...] = ()

    def match(self, hosts: Iterable[str], model: str | None) -> tuple[bool, str] | None:
        """(allowed, the key that decided) for the first list with a matching pattern, or None."""
        names = [name.lower() for name in hosts if name]
        for kind, patterns, subjects in (("models", self.models, [model] if model else []),
                                         ("hosts", self.hosts, names)):
            matched = [(pattern, allowed) for pattern, allowed in patterns
                       if any(_matches(kind, pattern, subject) for subject in subjects)]
            if matched:
                pattern, allowed = next((m for m in matched if not m[1]), matched[0])
                return allowed, f'remote_code.{kind}["{pattern}"]'
        return None


def _matches(kind: str, pattern: str, subject: str) -> bool:
    # Host names are case-insensitive (RFC 4343); paths are not.
    if kind == "hosts":
        return fnmatch.fnmatchcase(subject, pattern.lower())
    return fnmatch.fnmatchcase(subject, pattern)


class ConfigProblem(Exception):
    """A bad value: ``key`` (dotted) and what is wrong; the reader adds the file."""

    def __init__(self, key: str, problem: str) -> None:
        super().__init__(f"{key}: {problem}")
        self.key = key
        self.problem = problem


def parse_remote_code(value: Any) -> RemoteCodePolicy:
    if value is None:
        return RemoteCodePolicy()
    if isinstance(value, bool):
        return RemoteCodePolicy(default=value)
    if not isinstance(value, dict):
        raise ConfigProblem("remote_code", f"must be true, false or a mapping of {', '.join(POLICY_KEYS)}; "
                                           f"not {value!r}")
    unknown = sorted(str(k) for k in value if k not in POLICY_KEYS)
    if unknown:
        raise ConfigProblem(f"remote_code.{unknown[0]}", f"unknown key (known: {', '.join(POLICY_KEYS)})")
    default = value.get("default")
    if default is not None and not isinstance(default, bool):
        raise ConfigProblem("remote_code.default", f"must be true or false, not {default!r}")
    return RemoteCodePolicy(default=default, default_key="remote_code.default",
                            models=_patterns(value, "models"), hosts=_patterns(value, "hosts"))


def _patterns(policy: dict[Any, Any], kind: str) -> tuple[tuple[str, bool], ...]:
    raw = policy.get(kind)
    if raw is None:
        return ()
    if not isinstance(raw, dict):
        raise ConfigProblem(f"remote_code.{kind}", f'must map patterns to true or false ({{"gpu-*": true}}), '
                                                   f"not {raw!r}")
    out = []
    for pattern, allowed in raw.items():
        if not isinstance(pattern, str) or not pattern.strip():
            raise ConfigProblem(f"remote_code.{kind}", f"a pattern must be a non-empty string, not {pattern!r}")
        if not isinstance(allowed, bool):
            raise ConfigProblem(f'remote_code.{kind}["{pattern}"]', f"must be true or false, not {allowed!r}")
        out.append((pattern, allowed))
    return tuple(out)


def parse_transport(value: Any) -> str | None:
    from introspect.transport.registry import TRANSPORTS  # a dict of names: imports no transport

    if value is None:
        return None
    # What `--transport` accepts: no local (a bare name is a host; no host at all already is local).
    known = sorted(set(TRANSPORTS) - {"local"})
    if not isinstance(value, str) or value not in known:
        raise ConfigProblem("transport", f"unknown transport {value!r} (known: {', '.join(known)})")
    return value


def parse_parallel(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_PARALLEL:
        raise ConfigProblem("parallel", f"must be a whole number from 1 to {MAX_PARALLEL}, not {value!r}")
    return value


def parse_venv(value: Any) -> str | None:
    """A venv on the hosts: an absolute path there (never made relative to the config file)."""
    if value is None:
        return None
    if not isinstance(value, str) or not value.startswith("/") or "\n" in value:
        raise ConfigProblem("venv", f"must be an absolute path on the hosts (/opt/venvs/serve), not {value!r}")
    return value.rstrip("/") or "/"
