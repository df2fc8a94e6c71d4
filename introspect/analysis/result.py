"""The typed profile (``introspect.profile/v1``) and its JSON form.

The large sections (architecture, tokenizer) stay JSON-shaped dicts: their layout
is documented in their modules and pinned by the golden tests. The small ones are
TypedDicts; findings are :class:`~introspect.analysis.findings.Finding` records.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypedDict

from introspect.analysis.findings import Finding, Severity

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
    and ``container`` (container, pod or VM) only where the transport reached one."""

    container: str


def target_where(target: Mapping[str, Any]) -> str:
    """How reports name where a profile was taken: the host for SSH (as always),
    ``scheme://container[@host]`` for container transports, else ``local``."""
    container = target.get("container")
    if container:
        host = target.get("host")
        return f"{target.get('scheme')}://{container}" + (f"@{host}" if host else "")
    return str(target.get("host") or "local")


class EnvironmentSection(TypedDict):
    python_version: str | None
    python_executable: str | None
    venv: str | None
    in_venv: bool | None
    packages: dict[str, Any]
    missing_modules: list[Any]
    custom_code_modules: dict[str, Any]


class FilesSection(TypedDict):
    model_path: str | None
    real_path: str | None
    status: str | None
    listing: list[Any]
    listing_total: int  # the entries of the directory (at least: the name scan stops at 100,000)
    listing_truncated: bool
    total_size: int | None
    custom_code: list[dict[str, Any]]
    safetensors_bytes_read: int | None
    hashes: dict[str, Any] | None


@dataclass
class Profile:
    """One model's profile: the sections, the findings (errors first), the timings."""

    target: TargetSection
    environment: EnvironmentSection
    architecture: dict[str, Any]
    tokenizer: dict[str, Any]
    files: FilesSection
    serving: dict[str, Any] = field(default_factory=dict)  # engines, gpus, plan (analysis/serving/section.py)
    findings: list[Finding] = field(default_factory=list)
    timings: dict[str, Any] = field(default_factory=dict)
    cache: dict[str, Any] | None = None
    settings: dict[str, Any] | None = None  # which inventory and remote-code policy applied (live runs)
    schema: str = PROFILE_SCHEMA

    @property
    def has_errors(self) -> bool:
        return any(f.severity is Severity.ERROR for f in self.findings)

    def to_json(self) -> dict[str, Any]:
        """The ``introspect.profile/v1`` document, keys in their documented order."""
        return {
            "schema": self.schema,
            "target": dict(self.target),
            "environment": dict(self.environment),
            "architecture": self.architecture,
            "tokenizer": self.tokenizer,
            "files": dict(self.files),
            **self.serving,
            "findings": [f.to_json() for f in self.findings],
            "timings": self.timings,
            "cache": self.cache,
            # Only live runs know their settings: profiles rebuilt from older raw facts stay as they were.
            **({"settings": self.settings} if self.settings is not None else {}),
        }
