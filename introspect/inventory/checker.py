"""Validation helpers that know the file name, so every error names ``file:line: key``."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any, NoReturn

from introspect.errors import UsageError
from introspect.inventory.marked import MarkedMap, MarkedSeq
from introspect.inventory.model import InventoryError
from introspect.transport.names import check_destination, check_jump, check_user

_SECRET_WORDS = ("password", "passwd", "passphrase", "secret", "token")
_SECRET_HINT = (
    "secrets are not accepted in the inventory; use ssh-agent or an identity key file "
    "(identity: ~/.ssh/id_ed25519), and give a key file's passphrase through an "
    "environment variable named by `passphrase_env: VAR_NAME`"
)
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
HOST_NAME_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.:@+-]*$")
TAG_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.:/+-]*$")
MODULE_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
_SSH_WORD = re.compile(r"^[^\s\x00-\x1f\x7f-][^\s\x00-\x1f\x7f]*$")  # no blanks, no leading '-'


class Checker:
    """Converters and checks for one inventory file; each failure raises InventoryError."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, line: int | None, key: str, message: str) -> NoReturn:
        raise InventoryError(message, source=self.source, line=line, key=key)

    def mapping(self, value: Any, line: int | None, key: str, allowed: Iterable[str]) -> MarkedMap:
        if value is None:
            value = MarkedMap()
            value.line, value.key_lines, value.duplicates = line or 0, {}, []
        if not isinstance(value, MarkedMap):
            self.fail(line, key, f"expected a mapping, got {kind_of(value)}")
        self.no_duplicates(value, key)
        allowed = tuple(allowed)
        for k in value:
            kline = value.key_lines.get(k, value.line)
            lowered = k.lower()
            if any(w in lowered for w in _SECRET_WORDS) and not lowered.endswith("_env"):
                self.fail(kline, join_key(key, k), _SECRET_HINT)
            if k not in allowed:
                import difflib  # only for a key that is wrong

                close = difflib.get_close_matches(k, allowed, n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                self.fail(kline, join_key(key, k), f"unknown key (allowed: {', '.join(allowed)}){hint}")
        return value

    def no_duplicates(self, m: MarkedMap, key: str, what: str = "key") -> None:
        # Plain yaml.safe_load keeps the last of two equal keys silently; a host or
        # setting listed twice is almost always a copy-paste mistake.
        for dup, line, first in m.duplicates:
            self.fail(line, join_key(key, dup), f"duplicate {what} {dup!r} (first defined on line {first})")

    def get(self, m: MarkedMap, name: str, key: str, convert: Callable[[Any, int, str], Any],
            default: Any = None) -> Any:
        if name not in m or m[name] is None:
            return default
        return convert(m[name], m.key_lines.get(name, m.line), join_key(key, name))

    # scalar converters: (value, line, key) -> value
    def string(self, v: Any, line: int, key: str) -> str:
        if not isinstance(v, str) or not v.strip():
            self.fail(line, key, f"expected a non-empty string, got {kind_of(v)}")
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

    # Host and user names also reach ssh_config's `Match exec` shell commands (%h, %n, %r):
    # an inventory fed from cloud tags or a script is held to introspect.transport.names's rules.
    def destination(self, v: Any, line: int, key: str) -> str:
        """``[user@]host[:port]``, each part checked."""
        return self._named(check_destination, self.string(v, line, key), line, key)

    def address(self, v: Any, line: int, key: str) -> str:
        if isinstance(v, str) and "://" in v:
            return self.url(v, line, key)  # address: may hold a URL too
        v = self.ssh_word(v, line, key)
        if "@" in v:
            self.fail(line, key, f"{v!r}: put the user in `user:`, not in the address")
        return self.destination(v, line, key)

    def user(self, v: Any, line: int, key: str) -> str:
        return self._named(check_user, self.ssh_word(v, line, key), line, key)

    def jump(self, v: Any, line: int, key: str) -> str:
        return self._named(check_jump, self.ssh_word(v, line, key), line, key)

    def _named(self, check: Callable[[str], Any], v: str, line: int, key: str) -> str:
        try:
            check(v)
        except UsageError as exc:
            self.fail(line, key, exc.message)
        return v

    def url(self, v: Any, line: int, key: str) -> str:
        from introspect.transport.hostspec import parse_host

        v = self.string(v, line, key)
        try:
            parse_host(v)
        except UsageError as exc:
            self.fail(line, key, f"{exc.message} ({exc.hint})")
        return v

    def integer(self, v: Any, line: int, key: str, lo: int, hi: int) -> int:
        if isinstance(v, bool) or not isinstance(v, int):
            self.fail(line, key, f"expected an integer, got {kind_of(v)}")
        if not lo <= v <= hi:
            self.fail(line, key, f"{v} is out of range {lo}..{hi}")
        return v

    def port(self, v: Any, line: int, key: str) -> int:
        return self.integer(v, line, key, 1, 65535)

    def number(self, v: Any, line: int, key: str, positive: bool = True) -> float:
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            self.fail(line, key, f"expected a number, got {kind_of(v)}")
        if v < 0 or (positive and v == 0) or v != v:
            self.fail(line, key, f"{v} must be {'positive' if positive else 'zero or more'}")
        return float(v)

    def boolean(self, v: Any, line: int, key: str) -> bool:
        if not isinstance(v, bool):
            self.fail(line, key, f"expected true or false, got {kind_of(v)}")
        return v

    def env_name(self, v: Any, line: int, key: str) -> str:
        v = self.string(v, line, key)
        if not _ENV_NAME.match(v):
            # Not echoed: a value that is no variable name is most likely the passphrase itself.
            self.fail(line, key, "is not an environment variable name (letters, digits, '_'); give the "
                                 "variable's NAME, never the secret itself")
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
        if not isinstance(v, MarkedSeq):
            self.fail(line, key, f"expected a list, got {kind_of(v)}")
        return tuple(item(x, v.item_lines[i], f"{key}[{i}]") for i, x in enumerate(v))

    def pattern(self, regex: re.Pattern[str], what: str) -> Callable[[Any, int, str], str]:
        def convert(v: Any, line: int, key: str) -> str:
            v = self.string(v, line, key)
            if not regex.match(v):
                self.fail(line, key, f"{v!r} is not a valid {what}")
            return v

        return convert

    def requirement(self, v: Any, line: int, key: str) -> str:
        from packaging.requirements import InvalidRequirement, Requirement  # only an inventory with requires

        v = self.string(v, line, key)
        try:
            Requirement(v)
        except InvalidRequirement as exc:
            first = str(exc).splitlines()[0]
            self.fail(line, key, f"invalid requirement {v!r} ({first}); write PEP 508, e.g. 'transformers>=4.57'")
        return v


def join_key(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


def kind_of(v: Any) -> str:
    if v is None:
        return "nothing"
    if isinstance(v, bool):
        return f"boolean {v}"
    if isinstance(v, (MarkedMap, dict)):
        return "a mapping"
    if isinstance(v, (MarkedSeq, list)):
        return "a list"
    return f"{type(v).__name__} {v!r}"
