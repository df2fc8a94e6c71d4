"""The JSON Schemas of the documents introspect prints (generated: python -m introspect.documents.export)."""
