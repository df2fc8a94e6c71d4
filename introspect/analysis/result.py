"""The typed profile (``introspect.profile/v1``) and its JSON form.

Every section is one of the document models (introspect/documents/): the analysis builds
them and :meth:`Profile.document` puts them together; its JSON (``to_json``) is what the
CLI prints. Findings stay :class:`~introspect.analysis.findings.Finding` records (a
:class:`~introspect.analysis.findings.Severity` each) until the document is made.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypedDict

from introspect.analysis.findings import Finding, Severity
from introspect.documents.base import Number
from introspect.documents.profile import CacheHit, ProfileDocument, Settings
from introspect.documents.profile_architecture import Architecture
from introspect.documents.profile_files import Environment, Files, Target
from introspect.documents.profile_serving import Engines, Gpus, Plan
from introspect.documents.profile_tokenizer import Tokenizer

PROFILE_SCHEMA = "introspect.profile/v1"


class _TargetKeys(TypedDict):
    scheme: str | None
    host: str | None
    port: int | None
    user: str | None
    python: str | None
    venv: str | None
    model_path: str | None


class TargetSection(_TargetKeys, total=False):
    """Where the profile was taken: the raw ``target`` block, each key present (null when unknown),
    and ``container`` (container, pod or VM) only where the transport reached one. The sections'
    fix lines read it; the document holds it as :class:`~introspect.documents.profile_files.Target`."""

    container: str


def target_where(target: Mapping[str, Any]) -> str:
    """How reports name where a profile was taken: the host for SSH (as always),
    ``scheme://container[@host]`` for container transports, else ``local``."""
    container = target.get("container")
    if container:
        host = target.get("host")
        return f"{target.get('scheme')}://{container}" + (f"@{host}" if host else "")
    return str(target.get("host") or "local")


@dataclass
class Serving:
    """The serving sections (analysis/serving/section.py): engines, GPUs and the plan."""

    engines: Engines
    gpus: Gpus
    plan: Plan


@dataclass
class Profile:
    """One model's profile: the sections, the findings (errors first), the timings."""

    target: Target
    environment: Environment
    architecture: Architecture
    tokenizer: Tokenizer
    files: Files
    serving: Serving
    findings: list[Finding] = field(default_factory=list)
    timings: dict[str, Number | None] = field(default_factory=dict)  # step -> seconds
    cache: CacheHit | None = None
    settings: Settings | None = None  # which inventory and remote-code policy applied (live runs)
    schema: str = PROFILE_SCHEMA

    @property
    def has_errors(self) -> bool:
        return any(f.severity is Severity.ERROR for f in self.findings)

    def document(self) -> ProfileDocument:
        """The ``introspect.profile/v1`` document."""
        document = ProfileDocument(
            schema_="introspect.profile/v1", target=self.target, environment=self.environment,
            architecture=self.architecture, tokenizer=self.tokenizer, files=self.files,
            engines=self.serving.engines, gpus=self.serving.gpus, plan=self.serving.plan,
            findings=[f.record() for f in self.findings], timings=self.timings, cache=self.cache,
        )
        # Only live runs know their settings: profiles rebuilt from older raw facts stay as they were.
        if self.settings is not None:
            document.settings = self.settings
        return document

    def to_json(self) -> dict[str, Any]:
        """The document's JSON object, keys in their documented order."""
        return self.document().to_dict()
