"""Shape of an engine's speculative readiness for one model (facts/host/engine_readiness.py), and of the
``engines`` section that carries it (facts/host/engines.py).

The readiness shapes are re-exported by :mod:`introspect.remote.sections`; import them from there; the
engine-level ones (``EnginesFacts`` ...) from here. Standard library only, Python 3.8 (the functional
``TypedDict`` form where a key is ``class``).
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


# One class an engine registers (facts/host/engines.py): SGLang gives its module and file, vLLM its
# module, class and registry table.
EngineClass = TypedDict("EngineClass", {"module": str, "file": str, "class": str, "table": str}, total=False)


class EngineArchitectures(TypedDict):
    source: str  # where the registrations were read, relative to the engine's package
    classes: Dict[str, EngineClass]  # architecture name -> its registration


class EngineSpeculativeFacts(TypedDict):
    source: str
    algorithms: List[str]  # the speculative algorithms the version defines


class EngineQuantizationFacts(TypedDict, total=False):
    source: str
    methods: List[str]
    conditional: Dict[str, str]  # method -> the condition it is registered under (SGLang)


class EngineFacts(TypedDict):
    """One installed engine, read from its sources without importing it (facts/host/engines.py)."""

    name: str
    distribution: str
    version: Optional[str]
    location: Optional[str]
    layout: str  # "read" | "version-only"
    architectures: Optional[EngineArchitectures]
    speculative: Optional[EngineSpeculativeFacts]
    quantization: Optional[EngineQuantizationFacts]
    readiness: Optional[EngineReadiness]
    notes: List[str]


class EnginesFacts(TypedDict):
    """The model task's ``engines`` section."""

    searched: List[str]
    engines: List[EngineFacts]
