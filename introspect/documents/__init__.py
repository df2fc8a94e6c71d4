"""Typed models of every JSON document introspect emits, and their JSON Schemas.

``ProfileDocument.model_validate(json.loads(text)).to_json() == text`` (without the final
newline) for every document the CLI prints: the models keep today's key order and values.
The schemas under ``introspect/schemas/`` are generated from these models
(``python -m introspect.documents.export``).
"""

from __future__ import annotations

from introspect.documents.base import Document, ErrorMember, Record
from introspect.documents.registry import BY_SCHEMA, DOCUMENTS, document_class

__all__ = ["BY_SCHEMA", "DOCUMENTS", "Document", "ErrorMember", "Record", "document_class"]
