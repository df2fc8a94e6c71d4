"""Host specs as URLs, testinfra-style: ``SCHEME://...`` names the transport.

    ssh://[user@]host[:port]          paramiko (today's default)
    openssh://[user@]host[:port]      the system ssh client and all of ~/.ssh/config
    docker://CONTAINER[?user=U]       docker exec -i
    podman://CONTAINER[?user=U]       podman exec -i
    kubectl://[NAMESPACE/]POD[/CONTAINER][?context=C&kubeconfig=FILE]
    lxc://NAME[?client=lxc-attach|lxc]
    pct://VMID[?via=ssh://root@pve1]  Proxmox pct exec, on this host or through ssh
    local://                          this machine

A text without ``://`` is a bare name and keeps its old meaning (an address,
an ssh_config alias or an inventory entry): ``scheme`` is None. Every value is
validated here, once, so that nothing reaching a client's argv can be read as
an option (a host ``-oProxyCommand=...`` is refused, not passed on).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import parse_qsl, unquote, urlsplit

from introspect.errors import UsageError
from introspect.redact import known_password
from introspect.transport.names import HOST_RULE, check_destination, check_host, check_user
from introspect.transport.registry import TRANSPORTS

# The one scheme table is the registry's; the forms below are only the schemes that take
# more than ``[user@]host[:port]`` (any other registered scheme is parsed as that).
SCHEMES = tuple(TRANSPORTS)
LXC_CLIENTS = ("lxc-attach", "lxc")
_FORMS = {
    "ssh": "ssh://[user@]host[:port]",
    "openssh": "openssh://[user@]host[:port]",
    "docker": "docker://CONTAINER[?user=U]",
    "podman": "podman://CONTAINER[?user=U]",
    "kubectl": "kubectl://[NAMESPACE/]POD[/CONTAINER][?context=C]",
    "lxc": "lxc://NAME[?client=lxc-attach|lxc]",
    "pct": "pct://VMID[?via=ssh://root@pve1]",
    "local": "local://",
}
_QUERY_KEYS = {"docker": ("user",), "podman": ("user",), "kubectl": ("context", "kubeconfig"),
               "lxc": ("client",), "pct": ("via",)}
# docker's and podman's rule for container names (moby daemon/names: RestrictedNamePattern).
_CONTAINER = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
# Kubernetes object names: DNS-1123 subdomain (pods) and label (namespaces, containers).
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_WORD = re.compile(r"[^\s@/?#\[\]]+")
_USER = re.compile(r"[^\s/?#:\[\]]+")  # '@' allowed, percent-encoded: Kerberos principals (ml%40CORP)
_DIGITS = re.compile(r"[0-9]{1,12}")  # ASCII only: str.isdigit() also takes '²'
_PLAIN = re.compile(r"[A-Za-z0-9._:/@+=,~-]+")
# `docker exec --user` / `podman exec --user`: "<name|uid>[:<group|gid>]"
# (https://docs.docker.com/reference/cli/docker/container/exec/): never a shell character, even
# though it only ever travels as one argv word.
_CONTAINER_USER = re.compile(r"[A-Za-z0-9._][A-Za-z0-9._-]*(?::[A-Za-z0-9._][A-Za-z0-9._-]*)?")
_BARE = re.compile(r"[A-Za-z0-9._/-]+")  # NAMESPACE/POD/CONTAINER of a bare name with --transport kubectl


@dataclass(frozen=True)
class HostSpec:
    """One parsed host spec. ``scheme`` None is a bare name (in ``host``)."""

    scheme: str | None
    host: str | None = None
    port: int | None = None
    user: str | None = None  # the SSH login, or the user inside a container (?user=)
    container: str | None = None  # container name, pod, LXC name or Proxmox VMID
    pod_container: str | None = None  # kubectl: the container inside the pod
    namespace: str | None = None
    context: str | None = None
    kubeconfig: str | None = None
    client: str | None = None  # lxc: which client runs it
    via: HostSpec | None = None  # pct: the Proxmox host to run pct on
    text: str = ""

    @property
    def is_bare(self) -> bool:
        return self.scheme is None

    @property
    def label(self) -> str:
        """How error messages and profiles name this target (never with secrets or query)."""
        if self.scheme in (None, "ssh", "openssh"):
            return self.host or ""  # like today's SSH errors: "gpu1: [connect] ..."
        if self.scheme == "local":
            return "local"
        if self.scheme == "kubectl":
            parts = [p for p in (self.namespace, self.container, self.pod_container) if p]
            return "kubectl://" + "/".join(parts)
        where = f"@{self.via.label}" if self.via is not None else ""
        return f"{self.scheme}://{self.container}{where}"


def parse_host(text: str) -> HostSpec:
    """Parse ``--host`` / hosts.yaml ``url:``; raises UsageError with a one-line fix."""
    if not isinstance(text, str) or not text.strip():
        raise UsageError("empty host spec", hint="# pass --host NAME or --host SCHEME://... "
                         "(e.g. openssh://gpu1, podman://vllm)")
    if known_password(text) is not None:  # first: no later message may quote a piece of it
        raise UsageError(f"a password in host spec {text!r} is not supported",
                         hint="# pass --host ssh://root@gpu1, no password in the URL: use a key (--identity FILE) "
                              "or ssh-agent; a password on the command line ends up in shell history")
    if any(ord(ch) < 32 or ch.isspace() for ch in text):
        raise UsageError(f"host spec {text!r} contains whitespace or control characters",
                         hint="# write it as one word, e.g. ssh://root@gpu1:2222")
    if "://" not in text:
        return HostSpec(scheme=None, host=_checked_bare(text), text=text)
    scheme = text.split("://", 1)[0].lower()
    if scheme not in SCHEMES:
        raise UsageError(f"unknown transport {scheme!r} in host spec {text!r}",
                         hint="# use one of " + ", ".join(s + "://" for s in SCHEMES) + " or a bare host name")
    try:
        parts = urlsplit(text)
    except ValueError as exc:  # e.g. an unclosed '[' of an IPv6 address
        raise UsageError(f"host spec {text!r} is not a URL: {exc}", hint=f"# write it as {_form(scheme)}") from None
    if "#" in text:  # an empty fragment too: `ssh://x;cmd;#` must not lose its '#' unseen
        raise _form_error(scheme, text, "a '#' fragment")
    query = _query(scheme, parts.query, text)
    if scheme in ("ssh", "openssh") or scheme not in _FORMS:
        return _parse_ssh(scheme, parts.netloc, parts.path, text)
    if scheme == "local":
        if parts.netloc or parts.path not in ("", "/"):
            raise _form_error(scheme, text, f"{parts.netloc + parts.path!r}")
        return HostSpec(scheme="local", text=text)
    if scheme in ("docker", "podman"):
        name = _only_netloc(scheme, parts.netloc, parts.path, text)
        if not _CONTAINER.fullmatch(name):
            raise UsageError(f"{name!r} is not a {scheme} container name or ID",
                             hint=f"# use the NAME or ID that `{scheme} ps` shows: {_FORMS[scheme]}")
        user = query.get("user")
        return HostSpec(scheme=scheme, container=name,
                        user=_checked_word(user, "container user", text, _CONTAINER_USER) if user else None,
                        text=text)
    if scheme == "kubectl":
        return _parse_kubectl(parts.netloc, parts.path, query, text)
    if scheme == "lxc":
        return _parse_lxc(parts.netloc, parts.path, query, text)
    return _parse_pct(parts.netloc, parts.path, query, text)


def _form(scheme: str) -> str:
    return _FORMS.get(scheme, f"{scheme}://[user@]host[:port]")


def _form_error(scheme: str, text: str, what: str) -> UsageError:
    return UsageError(f"host spec {text!r} has {what}, which {scheme}:// does not take",
                      hint=f"# write it as {_form(scheme)}")


def _query(scheme: str, query: str, text: str) -> dict[str, str]:
    allowed = _QUERY_KEYS.get(scheme, ())
    try:
        pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query))
    except ValueError:
        raise _form_error(scheme, text, f"a malformed query {query!r}") from None
    found: dict[str, str] = {}
    for key, value in pairs:
        if key not in allowed:
            raise UsageError(f"{scheme}:// does not take ?{key}= (in {text!r})",
                             hint=f"# write it as {_form(scheme)}")
        if key in found:
            raise UsageError(f"?{key}= is given twice in {text!r}", hint="# give it once")
        if not value:
            raise UsageError(f"?{key}= is empty in {text!r}", hint=f"# write it as {_form(scheme)}")
        found[key] = value
    return found


def _checked_word(value: str, what: str, text: str, pattern: re.Pattern[str] = _WORD) -> str:
    # A leading '-' would be read as an option by ssh, docker or kubectl.
    if value.startswith("-") or not pattern.fullmatch(value):
        raise UsageError(f"{what} {value!r} in {text!r} is not a plain name",
                         hint=f"# a {what} may not start with '-' or contain spaces, '/', '?' or '#'")
    return value


def _parse_ssh(scheme: str, netloc: str, path: str, text: str) -> HostSpec:
    if path not in ("", "/"):
        raise UsageError(f"{scheme}:// takes no path ({path!r} in {text!r})",
                         hint=f"# write {_form(scheme)} and pass the model directory with --model")
    user = None
    if "@" in netloc:
        login, netloc = netloc.rsplit("@", 1)
        if ":" in login:
            raise UsageError(f"a password in host spec {text!r} is not supported",
                             hint="# use a key or ssh-agent; a password in a URL ends up in shell history")
        user = check_user(unquote(login), within=f"host spec {text!r}", hint=_ssh_hint(scheme))
    host, port = _split_port(scheme, netloc, text)
    if not host:
        raise UsageError(f"host spec {text!r} names no host", hint=f"# write it as {_form(scheme)}")
    return HostSpec(scheme=scheme, host=check_host(host, within=f"host spec {text!r}", hint=_ssh_hint(scheme)),
                    port=port, user=user, text=text)


def _ssh_hint(scheme: str) -> str:
    return f"# pass --host {scheme}://root@gpu1:2222: a host name is {HOST_RULE}"


def _checked_bare(text: str) -> str:
    """A bare name: an ssh destination (``[user@]host[:port]``, checked as one), or with a '/' a
    ``--transport kubectl`` path, whose scheme's parser checks it again."""
    if "/" in text:
        if text.startswith("-") or not _BARE.fullmatch(text):
            raise UsageError(f"host {text!r} is not a host name, alias or container path",
                             hint="# pass --host gpu1 or SCHEME://... (e.g. kubectl://serving/vllm-0)")
        return text
    check_destination(text)
    return text


def _split_port(scheme: str, netloc: str, text: str) -> tuple[str, int | None]:
    if netloc.startswith("["):  # [IPv6]:port
        host, closed, rest = netloc[1:].partition("]")
        if not closed or (rest and not rest.startswith(":")):
            raise _form_error(scheme, text, f"a malformed address {netloc!r}")
        port_text = rest[1:] if rest else None
    else:
        host, sep, port_text_or_empty = netloc.partition(":")
        port_text = port_text_or_empty if sep else None
    if port_text is None:
        return host, None
    if not _DIGITS.fullmatch(port_text) or not 1 <= int(port_text) <= 65535:
        raise UsageError(f"port {port_text!r} in {text!r} is not a number from 1 to 65535",
                         hint=f"# write it as {_form(scheme)}, e.g. {scheme}://root@gpu1:2222")
    return host, int(port_text)


def _only_netloc(scheme: str, netloc: str, path: str, text: str) -> str:
    if path not in ("", "/"):
        raise _form_error(scheme, text, f"a path {path!r}")
    if not netloc:
        raise UsageError(f"host spec {text!r} names no {scheme} target", hint=f"# write it as {_form(scheme)}")
    return unquote(netloc)


def _parse_kubectl(netloc: str, path: str, query: dict[str, str], text: str) -> HostSpec:
    words = [netloc, *[w for w in path.split("/") if w]] if netloc else []
    if not 1 <= len(words) <= 3 or "" in words or path.endswith("//"):
        raise UsageError(f"host spec {text!r} is not [NAMESPACE/]POD[/CONTAINER]",
                         hint=f"# write it as {_FORMS['kubectl']}, e.g. kubectl://serving/vllm-0/engine")
    namespace, pod, container = (None, words[0], None) if len(words) == 1 else (
        words[0], words[1], words[2] if len(words) == 3 else None)
    if not _DNS_SUBDOMAIN.fullmatch(pod) or len(pod) > 253:
        raise UsageError(f"{pod!r} is not a Kubernetes pod name", hint="# use the NAME that `kubectl get pods` shows")
    for what, value in (("namespace", namespace), ("container", container)):
        if value is not None and (not _DNS_LABEL.fullmatch(value) or len(value) > 63):
            raise UsageError(f"{value!r} is not a Kubernetes {what} name",
                             hint=f"# write it as {_FORMS['kubectl']}")
    context = query.get("context")
    if context is not None and (context.startswith("-") or not _PLAIN.fullmatch(context)):
        raise UsageError(f"context {context!r} in {text!r} is not a plain name",
                         hint="# use a name that `kubectl config get-contexts` lists")
    kubeconfig = query.get("kubeconfig")
    if kubeconfig is not None and kubeconfig.startswith("-"):
        raise UsageError(f"kubeconfig {kubeconfig!r} may not start with '-'", hint="# pass a file path")
    return HostSpec(scheme="kubectl", container=pod, pod_container=container, namespace=namespace,
                    context=context, kubeconfig=kubeconfig, text=text)


def _parse_lxc(netloc: str, path: str, query: dict[str, str], text: str) -> HostSpec:
    name = _only_netloc("lxc", netloc, path, text)
    if not _CONTAINER.fullmatch(name):
        raise UsageError(f"{name!r} is not an LXC container name", hint="# use the NAME that `lxc-ls` shows")
    client = query.get("client")
    if client is not None and client not in LXC_CLIENTS:
        raise UsageError(f"?client={client} in {text!r} is not one of {', '.join(LXC_CLIENTS)}",
                         hint="# use ?client=lxc-attach (LXC) or ?client=lxc (LXD)")
    return HostSpec(scheme="lxc", container=name, client=client, text=text)


def _parse_pct(netloc: str, path: str, query: dict[str, str], text: str) -> HostSpec:
    vmid = _only_netloc("pct", netloc, path, text)
    # Proxmox VE's VMID range (pve-guest-common: 100 .. 999999999).
    if not _DIGITS.fullmatch(vmid) or not 100 <= int(vmid) <= 999_999_999:
        raise UsageError(f"{vmid!r} in {text!r} is not a Proxmox VMID (a number from 100 to 999999999)",
                         hint=f"# use the VMID that `pct list` shows: {_FORMS['pct']}")
    via = None
    if "via" in query:
        via = parse_host(query["via"])
        if via.scheme not in ("ssh", "openssh"):
            raise UsageError(f"?via= in {text!r} must be an ssh:// or openssh:// URL",
                             hint="# write it as pct://200?via=ssh://root@pve1")
    return HostSpec(scheme="pct", container=str(int(vmid)), via=via, text=text)
