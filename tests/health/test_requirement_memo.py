"""The memoised requirement parsing of the conflict scan equals packaging's plain parser."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from packaging.markers import InvalidMarker, UndefinedComparison, UndefinedEnvironmentName
from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import InvalidVersion, Version

from introspect.checks import packages
from introspect.checks.packages import parse_requirement

NAMES = st.sampled_from(["torch", "Transformers", "tokenizers", "huggingface_hub", "jinja2", "a.b-c", "x"])
VERSIONS = st.sampled_from(["1", "1.0", "2.3.4", "0.19rc1", "1.0.post1", "4.45.0.dev0", "bad!", "1.*"])
OPS = st.sampled_from(["==", ">=", "<=", "<", ">", "~=", "!=", "==="])
SPECS = st.lists(st.tuples(OPS, VERSIONS).map("".join), max_size=3).map(",".join)
MARKERS = st.sampled_from(["", "python_version < '3.10'", "extra == 'vision'", "sys_platform == 'linux'",
                           "platform_machine == 'x86_64' and extra == 'gpu'", "python_version >= '3.9' or os_name == 'nt'",
                           "implementation_name == 'cpython'", "nonsense == 1"])
EXTRAS = st.lists(st.sampled_from(["vision", "gpu", "dev"]), max_size=2).map(lambda e: f"[{','.join(e)}]" if e else "")
STRUCTURED = st.tuples(NAMES, EXTRAS, SPECS, MARKERS).map(
    lambda t: t[0] + t[1] + (" " + t[2] if t[2] else "") + (" ; " + t[3] if t[3] else ""))
CORPUS = STRUCTURED | st.text(max_size=30)
ENVS = st.fixed_dictionaries({"python_version": st.sampled_from(["3.8", "3.11"]),
                              "sys_platform": st.sampled_from(["linux", "darwin"])})


def _plain(raw: str) -> Requirement | None:
    try:
        return Requirement(raw)
    except InvalidRequirement:
        return None


def _plain_marker(req: Requirement, env: dict[str, str], extra: str) -> bool:
    assert req.marker is not None
    try:
        return bool(req.marker.evaluate({**env, "extra": extra}))
    except (InvalidMarker, UndefinedComparison, UndefinedEnvironmentName):
        return True


def _plain_contains(req: Requirement, version: str) -> bool | None:
    try:
        return req.specifier.contains(Version(version), prereleases=True)
    except InvalidVersion:
        return None


@settings(max_examples=150, deadline=None)
@given(st.lists(CORPUS, min_size=1, max_size=6), ENVS, st.sampled_from(["", "vision", "gpu"]), VERSIONS)
def test_memoised_parse_and_verdicts_equal_the_plain_ones(raws, env, extra, version) -> None:
    key = tuple(sorted(env.items()))
    for raw in raws + raws:  # the second round answers from the memo
        plain, memo = _plain(raw), parse_requirement(raw)
        assert (plain is None) == (memo is None)
        if plain is None or memo is None:
            continue
        assert (str(memo), memo.name, memo.extras, str(memo.specifier), str(memo.marker)) == \
            (str(plain), plain.name, plain.extras, str(plain.specifier), str(plain.marker))
        if plain.marker is not None:
            assert packages._marker_verdict(raw, key, extra) == _plain_marker(plain, env, extra)
        assert packages._contains(raw, version) == _plain_contains(plain, version)
