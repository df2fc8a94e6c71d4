"""Two profiles in, their differences out, grouped. Pure: no I/O.

Groups:

- ``architecture``: every verdict and number of ``profile["architecture"]``, flattened to
  key paths (``moe.routed_experts``, ``params.config_estimate.total``). The evidence map,
  the human summary and paths are left out: they differ between hosts without the model
  differing.
- ``tokenizer``: load state and class, vocab size, bos/eos/pad/unk/mask, every special token
  by id, the chat template by sha256 with a unified diff of the two texts.
- ``files``: per-file sha256 of config, tokenizer, template and custom-code files
  (``profile["files"]["hashes"]``, from the remote ``collect_hashes``), the weights' index
  sha256 and each shard's size; tensor data is never read, so never compared.
- ``environment``: Python version and package versions.

Result: ``{"identical": bool, "labels": {"a", "b"}, "groups": {name: {"identical",
"changes": [{"key", "a", "b"}], "notes": [str], ...}}}``; the tokenizer group adds
``"template_diff": null | {"source_a", "source_b", "sha256_a", "sha256_b", "lines"}``.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable
from typing import Any

from introspect.analysis.diff import diff_tokenizer_sides
from introspect.analysis.diff.shapes import Change, DiffGroup, DiffResult, Labels, TemplateDiff
from introspect.analysis.result import target_where
from introspect.remote.contract import JSONObject, as_dict

GROUPS = ("architecture", "tokenizer", "files", "environment")
ARCH_IGNORED = frozenset({"evidence", "summary", "config_path", "path", "drafter_plan"})  # derived
MAX_LIST_INDEX = 4096      # longest list flattened item by item
MAX_TEMPLATE_LINES = 400   # unified diff lines kept
TOKEN_FIELDS = ("bos", "eos", "pad", "unk", "mask")

# The profiles compared are JSON documents (saved files, or a probe's output as JSON), read as
# such: a diff compares profiles of other introspect versions too, which the typed model may reject.
Flat = dict[str, object]  # key path -> the JSON value there


# --------------------------------------------------------------------------- flattening


def _scalar(value: object) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))


def flatten(value: object, prefix: str = "", ignored: frozenset[str] = frozenset()) -> Flat:
    """Key path -> value. Lists of scalars stay whole (a layer pattern is one fact); lists of
    objects are indexed. Keys in ``ignored`` are skipped at every level."""
    out: Flat = {}
    if isinstance(value, dict):
        for key in sorted(value, key=str):
            if str(key) in ignored:
                continue
            path = f"{prefix}.{key}" if prefix else str(key)
            out.update(flatten(value[key], path, ignored))
        if not value and prefix:
            out[prefix] = {}
    elif isinstance(value, list) and not all(_scalar(v) for v in value):
        for index, item in enumerate(value[:MAX_LIST_INDEX]):
            out.update(flatten(item, f"{prefix}[{index}]", ignored))
    else:
        out[prefix] = value
    return out


def compare_flat(a: Flat, b: Flat, prefix: str = "") -> list[Change]:
    """One change per key path whose values differ (an absent key reads as null)."""
    changes = []
    for key in sorted(set(a) | set(b)):
        left, right = a.get(key), b.get(key)
        if left != right and not (left in (None, {}, []) and right in (None, {}, [])):
            changes.append(Change(key=f"{prefix}{key}", a=left, b=right))
    return changes


def _group(changes: list[Change], notes: list[str] | None = None) -> DiffGroup:
    return {"identical": not changes, "changes": changes, "notes": notes or []}


# --------------------------------------------------------------------------- groups


def diff_architecture(a: JSONObject, b: JSONObject) -> DiffGroup:
    fa = flatten(as_dict(a.get("architecture")), ignored=ARCH_IGNORED)
    fb = flatten(as_dict(b.get("architecture")), ignored=ARCH_IGNORED)
    return _group(compare_flat(fa, fb))


def _special_map(tokenizer: JSONObject) -> dict[int, str]:
    out: dict[int, str] = {}
    for item in tokenizer.get("special_tokens") or []:
        if isinstance(item, dict) and isinstance(item.get("id"), int) and not isinstance(item.get("id"), bool):
            out[item["id"]] = str(item.get("token"))
    return out


def _template_diff(ta: JSONObject, tb: JSONObject, labels: tuple[str, str]) -> TemplateDiff | None:
    if ta.get("sha256") == tb.get("sha256"):
        return None
    text_a, text_b = ta.get("text"), tb.get("text")
    lines: list[str] = []
    if isinstance(text_a, str) and isinstance(text_b, str):
        lines = list(difflib.unified_diff(
            text_a.splitlines(), text_b.splitlines(),
            fromfile=f"{labels[0]}/{ta.get('source') or 'chat template'}",
            tofile=f"{labels[1]}/{tb.get('source') or 'chat template'}", lineterm=""))
    truncated = len(lines) > MAX_TEMPLATE_LINES
    return {"source_a": ta.get("source"), "source_b": tb.get("source"), "sha256_a": ta.get("sha256"),
            "sha256_b": tb.get("sha256"), "lines": lines[:MAX_TEMPLATE_LINES], "truncated": truncated,
            "text_available": bool(lines) or (isinstance(text_a, str) and isinstance(text_b, str))}


def diff_tokenizer(a: JSONObject, b: JSONObject, labels: tuple[str, str] = ("A", "B")) -> DiffGroup:
    ta, tb = as_dict(a.get("tokenizer")), as_dict(b.get("tokenizer"))
    # One side loaded, the other fell back: compare file facts with file facts.
    ta, tb, side_notes = diff_tokenizer_sides.like_for_like(ta, tb, labels)
    changes: list[Change] = []
    for key in ("loaded", "source", "class", "vocab_size"):
        changes += compare_flat({key: ta.get(key)}, {key: tb.get(key)})
    for key in TOKEN_FIELDS:
        changes += compare_flat(flatten(ta.get(key), key), flatten(tb.get(key), key))
    sa, sb = _special_map(ta), _special_map(tb)
    for token_id in sorted(set(sa) | set(sb)):
        if sa.get(token_id) != sb.get(token_id):
            changes.append(Change(key=f"special_tokens[{token_id}]", a=sa.get(token_id), b=sb.get(token_id)))
    error_a, error_b = as_dict(ta.get("error")), as_dict(tb.get("error"))
    for key in ("type", "missing_packages"):
        changes += compare_flat({f"error.{key}": error_a.get(key)}, {f"error.{key}": error_b.get(key)})
    ca, cb = as_dict(ta.get("chat_template")), as_dict(tb.get("chat_template"))
    for key in ("present", "source", "sha256"):
        changes += compare_flat({f"chat_template.{key}": ca.get(key)}, {f"chat_template.{key}": cb.get(key)})
    template = _template_diff(ca, cb, labels)
    notes = list(side_notes)
    if template is not None and not template["text_available"]:
        notes.append("the chat templates differ, but a profile lacks the template text: no line diff")
    changes = diff_tokenizer_sides.drop_load_cause(changes, side_notes)
    changes, _left = diff_tokenizer_sides.cap(changes, notes)
    group = _group(changes, notes)
    group["template_diff"] = template
    return group


def _hashes(profile: JSONObject) -> JSONObject | None:
    hashes = as_dict(profile.get("files")).get("hashes")
    if hashes is None:
        hashes = profile.get("hashes")  # tolerated: a profile that kept them at the top level
    return hashes if isinstance(hashes, dict) else None


def _file_shas(profile: JSONObject) -> Flat:
    shas: Flat = {}
    for name, info in as_dict(as_dict(_hashes(profile)).get("files")).items():
        shas[str(name)] = as_dict(info).get("sha256")
    # Custom code is hashed by the files probe into every profile, with or without `hashes`.
    for code in as_dict(profile.get("files")).get("custom_code") or []:
        if isinstance(code, dict) and code.get("file") and str(code["file"]) not in shas:
            shas[str(code["file"])] = code.get("sha256")
    return shas


def _weights_flat(profile: JSONObject) -> Flat:
    weights = as_dict(as_dict(_hashes(profile)).get("weights"))
    index = as_dict(weights.get("index"))
    out: Flat = {}
    if index:
        out["weights.index"] = index.get("file")
        out["weights.index.sha256"] = index.get("sha256")
        out["weights.index.total_size"] = index.get("total_size")
    for shard, size in as_dict(weights.get("shards")).items():
        out[f"weights.shards.{shard}"] = size
    for shard in weights.get("missing_shards") or []:
        out[f"weights.shards.{shard}"] = "missing"
    return out


def diff_files(a: JSONObject, b: JSONObject) -> DiffGroup:
    notes = []
    have = [_hashes(a) is not None, _hashes(b) is not None]
    if not all(have):
        which = "either profile" if not any(have) else ("A" if not have[0] else "B")
        notes.append(f"no per-file hashes in {which}: only custom code files are compared "
                     "(re-probe with this introspect to record them)")
    changes = compare_flat(_file_shas(a), _file_shas(b), "sha256:")
    if all(have):
        changes += compare_flat(_weights_flat(a), _weights_flat(b))
        skipped = sorted({str(s.get("name")) for h in (_hashes(a), _hashes(b))
                          for s in as_dict(h).get("skipped") or [] if isinstance(s, dict)})
        if skipped:
            notes.append("not hashed (above the size cap): " + ", ".join(map(str, skipped)))
    return _group(changes, notes)


def diff_environment(a: JSONObject, b: JSONObject) -> DiffGroup:
    ea, eb = as_dict(a.get("environment")), as_dict(b.get("environment"))
    changes = compare_flat({"python_version": ea.get("python_version")}, {"python_version": eb.get("python_version")})
    changes += compare_flat(as_dict(ea.get("packages")), as_dict(eb.get("packages")), "packages.")
    return _group(changes)


# --------------------------------------------------------------------------- entry point


def _label(profile: JSONObject, default: str) -> str:
    target = as_dict(profile.get("target"))
    if target.get("model_path"):
        return f"{target_where(target)}:{target['model_path']}"
    return default


def diff_result(a: JSONObject, b: JSONObject, groups: Iterable[str] = GROUPS, *,
                labels: tuple[str, str] | None = None) -> DiffResult:
    """Grouped differences between two profiles; ``identical`` covers the compared groups only."""
    a, b = as_dict(a), as_dict(b)
    wanted = list(dict.fromkeys(groups))
    unknown = [g for g in wanted if g not in GROUPS]
    if unknown:
        raise ValueError(f"unknown diff group(s) {', '.join(unknown)}; known: {', '.join(GROUPS)}")
    labels = labels or (_label(a, "A"), _label(b, "B"))
    differs: dict[str, Callable[[JSONObject, JSONObject], DiffGroup]] = {
        "architecture": diff_architecture,
        "tokenizer": lambda x, y: diff_tokenizer(x, y, ("a", "b")),
        "files": diff_files,
        "environment": diff_environment,
    }
    result = {name: differs[name](a, b) for name in wanted}
    return {"identical": all(g["identical"] for g in result.values()),
            "labels": Labels(a=labels[0], b=labels[1]), "groups": result}


def diff_profiles(a: JSONObject, b: JSONObject, groups: Iterable[str] = GROUPS, *,
                  labels: tuple[str, str] | None = None) -> dict[str, Any]:
    """:func:`diff_result` as the JSON object ``introspect diff --json`` prints (the CLI stamps it)."""
    return dict(diff_result(a, b, groups, labels=labels))
