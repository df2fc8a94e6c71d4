"""Every document introspect emits, by schema name: ``profile`` -> :class:`ProfileDocument`, ..."""

from __future__ import annotations

from introspect.documents.base import Document
from introspect.documents.compare import CompareDocument, DiffDocument
from introspect.documents.gpus import GpusDocument
from introspect.documents.health import HealthDocument, HistoryDocument
from introspect.documents.listing import FleetProfilesDocument, ModelsDocument
from introspect.documents.plan import PlanDocument
from introspect.documents.preflight import FleetPreflightDocument, PreflightDocument
from introspect.documents.profile import ProfileDocument
from introspect.documents.raw import RawDocument
from introspect.documents.small import CacheDocument, EnvDocument, ErrorDocument

DOCUMENTS: dict[str, type[Document]] = {cls.schema_name(): cls for cls in (
    ProfileDocument, RawDocument, HealthDocument, HistoryDocument, PreflightDocument, PlanDocument,
    ModelsDocument, DiffDocument, EnvDocument, CacheDocument, ErrorDocument, CompareDocument, GpusDocument,
    FleetProfilesDocument, FleetPreflightDocument,
)}
BY_SCHEMA: dict[str, type[Document]] = {cls.SCHEMA: cls for cls in DOCUMENTS.values()}


def document_class(name: str) -> type[Document]:
    """``profile``, ``profile/v1`` or ``introspect.profile/v1`` -> its model (KeyError: unknown)."""
    key = name.removeprefix("introspect.").split("/", 1)[0]
    return DOCUMENTS[key]
