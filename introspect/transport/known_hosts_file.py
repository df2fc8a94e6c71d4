"""known_hosts files read the way OpenSSH reads them (sshd(8), "SSH_KNOWN_HOSTS FILE FORMAT").

paramiko's ``HostKeys.load`` stops the whole file on the first line it cannot parse: an
``@cert-authority`` or ``@revoked`` marker line, or a corrupt base64 key, raises
(https://github.com/paramiko/paramiko/issues/1219). OpenSSH skips a bad line and goes on,
and so does this reader: each line becomes a ``KnownHostLine`` or a warning naming the
file and line. Hashed names (``|1|salt|hash``), wildcards (``*``, ``?``), negation (``!``)
and ``[host]:port`` entries match as OpenSSH matches them.
"""

from __future__ import annotations

import base64
import binascii
import fnmatch
import hashlib
import hmac
from dataclasses import dataclass
from pathlib import Path

MARKERS = ("@cert-authority", "@revoked")
HASH_MAGIC = "|1|"
MAX_FILE_BYTES = 64 * 1024 * 1024  # a fleet-wide known_hosts is a few MiB; more is not a known_hosts


@dataclass(frozen=True)
class KnownHostLine:
    """One usable line: marker ("" for a plain key), host patterns, key type and key blob."""

    path: str
    lineno: int
    marker: str
    patterns: tuple[str, ...]
    keytype: str
    blob: bytes

    def matches(self, name: str) -> bool:
        """True when ``name`` (``host`` or ``[host]:port``) matches a positive pattern and no negated one."""
        name = name.lower()
        matched = False
        for pattern in self.patterns:
            negated = pattern.startswith("!")
            if _pattern_matches(pattern[1:] if negated else pattern, name):
                if negated:
                    return False
                matched = True
        return matched

    @property
    def where(self) -> str:
        return f"{self.path}:{self.lineno}"


def _pattern_matches(pattern: str, name: str) -> bool:
    if pattern.startswith(HASH_MAGIC):
        return _hashed_matches(pattern, name)
    # fnmatchcase with the pattern lowered: OpenSSH's match_hostname is case-insensitive.
    return fnmatch.fnmatchcase(name, pattern.lower()) if any(c in pattern for c in "*?") \
        else name == pattern.lower()


def _hashed_matches(pattern: str, name: str) -> bool:
    """``|1|base64(salt)|base64(HMAC-SHA1(salt, name))``, as ``ssh-keygen -H`` writes it."""
    try:
        salt_b64, hash_b64 = pattern[len(HASH_MAGIC):].split("|", 1)
        salt = base64.b64decode(salt_b64, validate=True)
        expected = base64.b64decode(hash_b64, validate=True)
    except (ValueError, binascii.Error):
        return False
    return hmac.compare_digest(hmac.new(salt, name.encode("utf-8"), hashlib.sha1).digest(), expected)


def hashed_name(name: str, salt: bytes) -> str:
    """The hashed form of ``name`` with ``salt`` (for tests and for writing hashed files)."""
    digest = hmac.new(salt, name.encode("utf-8"), hashlib.sha1).digest()
    return HASH_MAGIC + base64.b64encode(salt).decode() + "|" + base64.b64encode(digest).decode()


def parse_line(text: str, path: str, lineno: int) -> tuple[KnownHostLine | None, str | None]:
    """(line, None) for a usable line, (None, warning) for a bad one, (None, None) for blank/comment."""
    fields = text.split()
    if not fields or fields[0].startswith("#"):
        return None, None
    marker = ""
    if fields[0].startswith("@"):
        if fields[0] not in MARKERS:
            return None, f"{path}:{lineno}: unknown marker {fields[0]!r}, line skipped"
        marker, fields = fields[0], fields[1:]
    if len(fields) < 3:
        return None, f"{path}:{lineno}: expected 'hosts keytype key', line skipped"
    hosts, keytype, key_b64 = fields[0], fields[1], fields[2]
    try:
        blob = base64.b64decode(key_b64, validate=True)
    except (ValueError, binascii.Error):
        return None, f"{path}:{lineno}: the {keytype} key is not valid base64, line skipped"
    if not _blob_names(blob, keytype):
        return None, f"{path}:{lineno}: the key blob is not a {keytype} key, line skipped"
    return KnownHostLine(path, lineno, marker, tuple(p for p in hosts.split(",") if p), keytype, blob), None


def _blob_names(blob: bytes, keytype: str) -> bool:
    """An SSH public key blob starts with its own type name (RFC 4253 section 6.6)."""
    if len(blob) < 4:
        return False
    length = int.from_bytes(blob[:4], "big")
    return blob[4:4 + length] == keytype.encode("ascii", "replace")


def read_known_hosts(path: Path) -> tuple[list[KnownHostLine], list[str]]:
    """Every usable line of one file, and one warning per skipped line. A missing file is empty."""
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        return [], []
    except OSError as exc:
        return [], [f"{path}: cannot read ({exc.strerror or exc}), file skipped"]
    if len(data) > MAX_FILE_BYTES:
        return [], [f"{path}: larger than {MAX_FILE_BYTES} bytes, file skipped"]
    lines: list[KnownHostLine] = []
    warnings: list[str] = []
    for lineno, raw in enumerate(data.splitlines(), start=1):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            warnings.append(f"{path}:{lineno}: not UTF-8 text, line skipped")
            continue
        line, warning = parse_line(text, str(path), lineno)
        if line is not None:
            lines.append(line)
        if warning is not None:
            warnings.append(warning)
    return lines, warnings
