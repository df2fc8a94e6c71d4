"""Shape of an engine's speculative readiness for one model (facts/host/engine_readiness.py).

Re-exported by :mod:`introspect.remote.sections`; import it from there. Standard
library only, Python 3.8 (the functional ``TypedDict`` form where a key is ``class``).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, TypedDict

# A line of the engine that states a requirement: path relative to the engine's package.
CodeSite = TypedDict("CodeSite", {"file": str, "line": Optional[int], "text": Optional[str]})
# Where a model class provides it (the class statement, or the def of the hook).
ClassSite = TypedDict("ClassSite", {"file": str, "line": int, "class": str})


class ReadinessCheck(TypedDict):
    """One thing the engine requires of the model class for a method."""

    requires: str  # a hook name ("set_eagle3_layers_to_capture"), an interface, "draft architecture"
    requirement: Optional[CodeSite]
    verdict: str  # "yes" | "no" | "unknown"
    provided_by: Optional[ClassSite]
    delegate: Optional[Dict[str, Any]]  # the wrapped model a hook hands the call to (attribute, class, file, line)
    why: str


class MethodReadiness(TypedDict):
    """One speculative method of the engine, for this model's class."""

    method: str  # the engine's own name (SGLang "EAGLE3", vLLM "eagle3")
    kind: str  # dflash | dspark | eagle | eagle3 | mtp | ngram | standalone | draft_model | other
    aliases: List[str]  # other names the engine accepts for it (vLLM's per-family MTP names)
    verdict: str
    why: str
    requires: str  # of the deciding check (the first "no", else the first "unknown", else the first)
    requirement: Optional[CodeSite]  # of the deciding check (the first "no", else the first "unknown", else the first)
    provided_by: Optional[ClassSite]
    checks: List[ReadinessCheck]


class EngineReadiness(TypedDict):
    architecture: Optional[str]  # the target's architectures[0]: the class the engine instantiates
    class_site: Optional[ClassSite]
    files_parsed: int
    methods: List[MethodReadiness]
    notes: List[str]
