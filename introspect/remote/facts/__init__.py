"""Raw facts: one module per raw section, or per kind of file or evidence a section is built from."""
