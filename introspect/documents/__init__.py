"""Typed models of every JSON document introspect emits, and their JSON Schemas.

``ProfileDocument.model_validate(json.loads(text)).to_json() == text`` (without the final
newline) for every document the CLI prints: the models keep today's key order and values.
The schemas under ``introspect/schemas/`` are generated from these models
(``python -m introspect.documents.export``).

The registry (every document class) is imported on first use of ``DOCUMENTS``, ``BY_SCHEMA`` or
``document_class``, not with the package: a command that builds one document
(``introspect.documents.health``) then pays for pydantic and that document's models only,
not for the profile's and the plan's hundred models (a third of a CPU-second at start-up).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from introspect.documents.base import Document, ErrorMember, Record

if TYPE_CHECKING:
    from introspect.documents.registry import BY_SCHEMA, DOCUMENTS, document_class

_REGISTRY = ("BY_SCHEMA", "DOCUMENTS", "document_class")


def __getattr__(name: str) -> Any:
    # PEP 562: the package's lazy attributes (https://peps.python.org/pep-0562/).
    if name in _REGISTRY:
        from introspect.documents import registry

        return getattr(registry, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["BY_SCHEMA", "DOCUMENTS", "Document", "ErrorMember", "Record", "document_class"]
