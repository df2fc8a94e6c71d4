"""Raw facts: one module per section or reader, each the only reader of its files."""
