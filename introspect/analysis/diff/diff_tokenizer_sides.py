"""``diff`` of two tokenizer sections when one side loaded and the other fell back (pure).

A host that cannot load the tokenizer (a missing package, say) reports the facts the
files give. Comparing those with the other host's loaded answers compares two methods,
not two models, so both sides are compared by their file-derived facts (a loaded
profile keeps them under ``from_files``) and the load status is said once, with the
cause. Long change lists are capped, with a count of what was left out.
"""

from __future__ import annotations

from introspect.analysis.diff.shapes import Change
from introspect.remote.contract import JSONObject, as_dict

MAX_CHANGES = 50
COMPARED = ("class", "vocab_size", "len", "bos", "eos", "pad", "unk", "mask", "special_tokens")


def like_for_like(ta: JSONObject, tb: JSONObject, labels: tuple[str, str]) -> tuple[JSONObject, JSONObject, list[str]]:
    """(section a, section b, notes): a loaded side replaced by its file-derived facts.

    The sections are the JSON of the compared profiles (saved files of any introspect version)."""
    if bool(ta.get("loaded")) == bool(tb.get("loaded")):
        return ta, tb, []
    loaded, fell = (ta, tb) if ta.get("loaded") else (tb, ta)
    who = labels[1] if ta.get("loaded") else labels[0]
    error = as_dict(fell.get("error"))
    cause = f"{error.get('type')}: {error.get('message')}" if error else "no load attempted"
    missing = error.get("missing_packages") or []
    if missing:
        cause += f" (missing {', '.join(map(str, missing))})"
    notes = [f"{who} could not load the tokenizer ({cause}); both sides are compared by the facts their files give"]
    facts = as_dict(loaded.get("from_files"))
    if not facts:
        notes.append("the loaded side's profile keeps no file-derived facts: its loaded values are compared")
        return ta, tb, notes
    as_files = dict(loaded, **{k: facts.get(k) for k in COMPARED})
    as_files["chat_template"] = dict(as_dict(loaded.get("chat_template")), sha256=facts.get("chat_template_sha256"),
                                     source=facts.get("chat_template_source"))
    as_files["loaded"], as_files["source"], as_files["error"] = loaded.get("loaded"), loaded.get("source"), None
    pair = (as_files, fell) if ta.get("loaded") else (fell, as_files)
    return pair[0], pair[1], notes


def drop_load_cause(changes: list[Change], notes: list[str]) -> list[Change]:
    """The error fields and source are said by the note: keep the ``loaded`` change only."""
    if not notes:
        return changes
    return [c for c in changes if not c["key"].startswith(("error.", "source"))]


def cap(changes: list[Change], notes: list[str]) -> tuple[list[Change], int]:
    """At most MAX_CHANGES changes; the count left out goes into a note."""
    if len(changes) <= MAX_CHANGES:
        return changes, 0
    left = len(changes) - MAX_CHANGES
    notes.append(f"{len(changes)} changes; the first {MAX_CHANGES} are listed, {left} more are not")
    return changes[:MAX_CHANGES], left
