"""Secrets in text, found by pattern: the one set of rules, on the host and on the controller.

Runs on the host under the target interpreter (standard library only, Python 3.8+), so
the environment facts leave the host already masked; the controller applies the same
rules again to everything it prints or writes (``introspect/redact.py``), together with
the secrets the run itself knows (key passphrases).

What is masked, each replaced by ``<redacted>``:

- the userinfo of a URL, with any characters in the password: everything between
  ``scheme://`` and the LAST ``@`` of the URL, since an unencoded password may hold ``@``,
  ``/``, ``?`` or ``#`` (``https://u:p@ss/w@rd@idx.example/simple``). A user name alone is
  kept for the login schemes (``ssh://root@gpu1``), whose user is no secret, but not for
  http(s), where it is often the token itself (``https://TOKEN@github.com``);
- ``user:password@host`` without a scheme, the same way;
- the value of a query (or fragment) parameter with a secret-looking name: ``token``,
  ``access_token``, ``api_key``, ``sig``, ``X-Amz-Signature``, ``X-Amz-Credential``,
  ``X-Goog-Signature``, ``auth``, ... (:func:`is_secret_param`);
- an ``Authorization:`` header's value and a ``Bearer`` token;
- tokens of a well-known shape: Hugging Face ``hf_...``, GitHub ``ghp_...``/``github_pat_...``,
  AWS access key ids ``AKIA...``, OpenAI-style ``sk-...``, Slack ``xox?-...``.

Masking errs on the side of the secret: a path with an ``@`` after a host (``https://h/a@b``)
loses its host too.
"""

import re
from typing import Dict, Optional

REDACTED = "<redacted>"

# Environment variables whose value is never shown, by a word in the name.
SECRET_NAME_WORDS = ("token", "secret", "password", "passwd", "passphrase", "key", "access", "credential",
                     "auth", "signature", "cookie")

# Query parameter names whose value is a secret: any name holding one of these words ...
SECRET_PARAM_WORDS = ("token", "secret", "passw", "passphrase", "signature", "credential", "auth",
                      "apikey", "api_key", "api-key", "accesskey", "access_key", "privatekey", "private_key")
# ... or exactly one of these (Azure SAS ``sig``, OAuth ``code``, Google ``key``).
SECRET_PARAM_NAMES = ("key", "sig", "pwd", "pass", "code", "session", "sessionid")

# Schemes whose user name alone (no password) is kept: logins, not bearer tokens.
LOGIN_SCHEMES = ("ssh", "openssh", "sftp", "scp", "rsync", "git+ssh", "ssh+git", "telnet", "ftp")
_PLAIN_USER = re.compile(r"[A-Za-z0-9._%+-]+")

_URL = re.compile(r"(?<![A-Za-z0-9+.-])([A-Za-z][A-Za-z0-9+.-]*)://(\S*)")
# user:password@host without a scheme; ``:`` not followed by ``//`` (that is a URL, above).
_BARE_LOGIN = re.compile(r"(?<![^\s'\"(\[=,;<])([A-Za-z0-9._%+-]+):(?!//)(\S+)@(?=[A-Za-z0-9\[])")
_FIRST_SEGMENT = re.compile(r"[^/?#]*")
_DOTTED_HOST = re.compile(r"(?:[A-Za-z0-9-]+\.)+[A-Za-z][A-Za-z0-9-]*\.?")
# A dotted host name, with a numeric port at most: a first segment like that holds no login.
_HOST_PORT = re.compile(_DOTTED_HOST.pattern + r"(?::[0-9]{1,5})?")
# A value runs to the next separator or whitespace: a quote after it is masked too, rather than
# a quote inside it ending the mask early.
_PARAM = re.compile(r"([?&;#])([^=&#;\s?]+)=([^&#;\s]*)")
_AUTH_HEADER = re.compile(r"(?i)(\bauthorization\s*[:=]\s*)(?:(bearer|basic|token|digest)\s+)?([^\s'\",;]+)")
_BEARER = re.compile(r"(?<![A-Za-z0-9_])(Bearer\s+)([A-Za-z0-9._~+/=-]{8,})")
_TOKEN_SHAPES = re.compile(
    r"(?<![A-Za-z0-9])(?:hf_[A-Za-z0-9]{30,}|gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,}"
    r"|AKIA[0-9A-Z]{16}|ASIA[0-9A-Z]{16}|sk-[A-Za-z0-9_-]{20,}|xox[abposr]-[A-Za-z0-9-]{10,})")
# Each rule runs only on text holding its marker (a substring test is ~100x cheaper than a
# regex scan): raw facts run to megabytes and are masked on every write.
# The markers are the shapes' literal starts: "gh" alone is in every "high" and "through" of a
# package list, and made each reply pay the whole scan.
_TOKEN_MARKERS = ("hf_", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "AKIA", "ASIA", "sk-", "xox")
# What every bare login holds, found from its literal ':' (a fast scan): the full rule's
# look-behind is tried at every position of the text, ~40x slower.
_BARE_LOGIN_GATE = re.compile(r":(?!//)\S+@")


def is_secret_name(name: str) -> bool:
    """An environment variable whose value is never shown (``HF_TOKEN``, ``AWS_SECRET_ACCESS_KEY``)."""
    low = name.lower()
    return any(word in low for word in SECRET_NAME_WORDS)


def is_secret_param(name: str) -> bool:
    """A URL query parameter whose value is a secret (``token``, ``X-Amz-Signature``, ``sig``)."""
    low = name.lower()
    return low in SECRET_PARAM_NAMES or any(word in low for word in SECRET_PARAM_WORDS)


def _userinfo_end(tail: str) -> int:
    """Where the userinfo of ``scheme://<tail>`` ends: its LAST '@' (an unencoded password may hold
    '@', '/', '?', '#'); -1 for none. The one exception: before the first '/' stands a dotted host
    name with neither '@' nor ':' (``github.com/org/repo@v1.0``), so the '@' is in the path."""
    at = tail.rfind("@")
    if at <= 0:
        return -1
    if tail.startswith("[") and tail[at + 1:at + 2] == "]":
        return -1  # a usage form, ``ssh://[user@]host[:port]``: '[' cannot start a userinfo (RFC 3986 3.2.1)
    first = _FIRST_SEGMENT.match(tail)
    if first is not None and _HOST_PORT.fullmatch(first.group(0)):
        return -1
    return at


def _inner_url(tail: str, at: int) -> Optional[int]:
    """Where a URL nested before the '@' starts, when no ':' precedes it (``200?via=ssh://...``);
    after a ':' it is part of a password (``u:a://b@host``), masked whole."""
    inner = _URL.search(tail, 0, at)
    if inner is None or ":" in tail[:inner.start()]:
        return None
    return inner.start()


def _url(match: "re.Match[str]") -> str:
    scheme, tail = match.group(1), match.group(2)
    at = _userinfo_end(tail)
    if at <= 0:  # no userinfo; a URL in its path or query still gets its own (h.example/?u=https://...)
        return scheme + "://" + _params(_URL.sub(_url, tail))
    inner = _inner_url(tail, at)
    if inner is not None:  # a URL in this one's query (pct://200?via=ssh://root:pw@pve1): its own rules
        return scheme + "://" + _params(tail[:inner]) + _URL.sub(_url, tail[inner:])
    userinfo = tail[:at]
    if ":" not in userinfo and scheme.lower() in LOGIN_SCHEMES and _PLAIN_USER.fullmatch(userinfo):
        return scheme + "://" + userinfo + _params(tail[at:])
    return scheme + "://" + REDACTED + _params(tail[at:])


def _param(match: "re.Match[str]") -> str:
    if not is_secret_param(match.group(2)) or not match.group(3):
        return match.group(0)
    return match.group(1) + match.group(2) + "=" + REDACTED


def _params(text: str) -> str:
    return _PARAM.sub(_param, text)


def _auth_header(match: "re.Match[str]") -> str:
    kind = match.group(2)
    return match.group(1) + (kind + " " if kind else "") + REDACTED


def redact_text(text: str) -> str:
    """``text`` with every secret the patterns recognize replaced by ``<redacted>``."""
    if not isinstance(text, str):
        return text
    if "://" in text:
        text = _URL.sub(_url, text)
    if "@" in text and _BARE_LOGIN_GATE.search(text):
        text = _BARE_LOGIN.sub(lambda m: REDACTED + "@", text)
    if "=" in text:
        text = _params(text)
    if "uthorization" in text or "UTHORIZATION" in text:
        text = _AUTH_HEADER.sub(_auth_header, text)
    if "Bearer" in text:
        text = _BEARER.sub(lambda m: m.group(1) + REDACTED, text)
    if any(marker in text for marker in _TOKEN_MARKERS):
        text = _TOKEN_SHAPES.sub(REDACTED, text)
    return text


def redact_env(environ: Dict[str, str]) -> Dict[str, str]:
    """Variables with a secret-looking name blanked, every other value masked by pattern."""
    return dict((name, REDACTED if is_secret_name(name) else redact_text(value))
                for name, value in environ.items())
