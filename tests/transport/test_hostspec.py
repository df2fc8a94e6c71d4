"""Host specs as URLs: every scheme's form, every refusal with a one-line fix, and properties."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from introspect.errors import EXIT_USAGE, UsageError
from introspect.transport.hostspec import SCHEMES, HostSpec, parse_host


@pytest.mark.parametrize(("text", "expected"), [
    ("gpu1", HostSpec(scheme=None, host="gpu1", text="gpu1")),
    ("root@gpu1", HostSpec(scheme=None, host="root@gpu1", text="root@gpu1")),  # today's meaning, untouched
    ("ssh://gpu1", HostSpec(scheme="ssh", host="gpu1", text="ssh://gpu1")),
    ("ssh://root@10.0.0.7:2222", HostSpec(scheme="ssh", host="10.0.0.7", port=2222, user="root",
                                          text="ssh://root@10.0.0.7:2222")),
    ("openssh://ml%40CORP@[fe80::1]:22", HostSpec(scheme="openssh", host="fe80::1", port=22, user="ml@CORP",
                                                  text="openssh://ml%40CORP@[fe80::1]:22")),
    ("docker://vLLM_engine.1?user=nobody", HostSpec(scheme="docker", container="vLLM_engine.1", user="nobody",
                                                    text="docker://vLLM_engine.1?user=nobody")),
    ("podman://0123abcd", HostSpec(scheme="podman", container="0123abcd", text="podman://0123abcd")),
    ("kubectl://vllm-0", HostSpec(scheme="kubectl", container="vllm-0", text="kubectl://vllm-0")),
    ("kubectl://serving/vllm-0", HostSpec(scheme="kubectl", namespace="serving", container="vllm-0",
                                          text="kubectl://serving/vllm-0")),
    ("kubectl://serving/vllm-0/engine?context=arn:aws:eks:us-east-1:1:cluster/gpu",
     HostSpec(scheme="kubectl", namespace="serving", container="vllm-0", pod_container="engine",
              context="arn:aws:eks:us-east-1:1:cluster/gpu",
              text="kubectl://serving/vllm-0/engine?context=arn:aws:eks:us-east-1:1:cluster/gpu")),
    ("lxc://ct200", HostSpec(scheme="lxc", container="ct200", text="lxc://ct200")),
    ("lxc://ct200?client=lxc", HostSpec(scheme="lxc", container="ct200", client="lxc", text="lxc://ct200?client=lxc")),
    ("pct://200", HostSpec(scheme="pct", container="200", text="pct://200")),
    ("local://", HostSpec(scheme="local", text="local://")),
    ("LOCAL://", HostSpec(scheme="local", text="LOCAL://")),
])
def test_forms(text, expected):
    assert parse_host(text) == expected


def test_pct_via_a_proxmox_host():
    spec = parse_host("pct://200?via=ssh://root@pve1")
    assert spec.via == HostSpec(scheme="ssh", host="pve1", user="root", text="ssh://root@pve1")
    assert spec.label == "pct://200@pve1"
    assert parse_host("pct://200?via=openssh://pve1:2222").via.port == 2222


@pytest.mark.parametrize(("text", "label"), [
    ("gpu1", "gpu1"), ("ssh://root@gpu1:22", "gpu1"), ("openssh://gpu1", "gpu1"),
    ("docker://vllm?user=nobody", "docker://vllm"), ("kubectl://serving/vllm-0/engine?context=east",
                                                     "kubectl://serving/vllm-0/engine"),
    ("local://", "local"), ("pct://200", "pct://200"),
])
def test_labels_carry_no_query(text, label):
    assert parse_host(text).label == label


@pytest.mark.parametrize(("text", "needle"), [
    ("", "empty host spec"),
    ("gpu 1", "whitespace"),
    ("-oProxyCommand=x", "starts with '-'"),
    ("ssh://-oProxyCommand=touch%20x", "not a plain name"),
    ("openssh://root:hunter2@gpu1", "password"),
    ("ssh://gpu1:99999", "1 to 65535"),
    ("ssh://gpu1:ssh", "1 to 65535"),
    ("ssh://", "names no host"),
    ("ssh://gpu1/models/x", "takes no path"),
    ("ssh://[fe80::1", "not a URL"),
    ("ssh://gpu1?x=1", "does not take ?x="),
    ("ssh://gpu1#frag", "fragment"),
    ("dockr://vllm", "unknown transport 'dockr'"),
    ("docker://", "names no docker target"),
    ("docker://-H=tcp:", "not a docker container name"),
    ("docker://a/b", "path"),
    ("docker://vllm?user=", "is empty"),
    ("docker://vllm?user=a&user=b", "given twice"),
    ("kubectl://Vllm", "not a Kubernetes pod name"),
    ("kubectl://a/b/c/d", "[NAMESPACE/]POD[/CONTAINER]"),
    ("kubectl://Serving/vllm-0", "not a Kubernetes namespace name"),
    ("kubectl://vllm-0?context=--kubeconfig", "not a plain name"),
    ("lxc://ct?client=incus", "not one of lxc-attach, lxc"),
    ("pct://99", "not a Proxmox VMID"),
    ("pct://ct200", "not a Proxmox VMID"),
    ("pct://²", "not a Proxmox VMID"),  # a Unicode digit, which str.isdigit() accepts
    ("ssh://gpu1:²", "1 to 65535"),
    ("ssh://%2Dx@gpu1", "not a plain name"),
    ("pct://200?via=docker://x", "ssh:// or openssh://"),
    ("local://gpu1", "local:// does not take"),
])
def test_refusals_are_usage_errors_with_a_fix(text, needle):
    with pytest.raises(UsageError) as info:
        parse_host(text)
    assert needle in info.value.message
    assert info.value.exit_code == EXIT_USAGE and info.value.hint and "\n" not in info.value.hint


@given(st.one_of(st.text(max_size=60),
                 st.builds(lambda scheme, rest: f"{scheme}://{rest}", st.sampled_from(SCHEMES), st.text(max_size=40))))
def test_any_text_parses_or_is_a_usage_error(text):
    try:
        spec = parse_host(text)
    except UsageError:
        return
    # Whatever is accepted can never be read as an option by a client.
    for value in (spec.host, spec.user, spec.container, spec.pod_container, spec.namespace, spec.context):
        assert value is None or not value.startswith("-")
    assert spec.scheme is None or spec.scheme in SCHEMES


names = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?", fullmatch=True)


@given(st.sampled_from(["ssh", "openssh"]), st.one_of(st.none(), names), names,
       st.one_of(st.none(), st.integers(1, 65535)))
def test_ssh_urls_round_trip(scheme, user, host, port):
    text = f"{scheme}://{user + '@' if user else ''}{host}{':' + str(port) if port else ''}"
    spec = parse_host(text)
    assert (spec.scheme, spec.user, spec.host, spec.port) == (scheme, user, host, port)


@given(st.one_of(st.none(), names), names, st.one_of(st.none(), names))
def test_kubectl_urls_round_trip(namespace, pod, container):
    if namespace is None and container is not None:
        return  # two words always mean NAMESPACE/POD
    text = "kubectl://" + "/".join(p for p in (namespace, pod, container) if p)
    spec = parse_host(text)
    assert (spec.namespace, spec.container, spec.pod_container) == (namespace, pod, container)


@pytest.mark.parametrize(("text", "label"), [
    ("openssh://root@gpu1:2222", "gpu1"), ("docker://vllm?user=nobody", "docker://vllm"),
    ("podman://vllm", "podman://vllm"), ("kubectl://serving/vllm-0/engine?context=east",
                                         "kubectl://serving/vllm-0/engine"),
    ("lxc://ct1?client=lxc-attach", "lxc://ct1"), ("pct://200", "pct://200"),
])
def test_every_new_scheme_builds_its_executor_from_the_spec(text, label):
    from introspect.transport.registry import create_executor, settings_for_spec

    spec = parse_host(text)
    executor = create_executor(settings_for_spec(spec))
    assert executor.target.scheme == spec.scheme and executor.target.label == label
    assert executor.label == label
