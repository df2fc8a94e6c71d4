"""introspect: remote model introspection over SSH.

Layers, imported one way: ``cli`` -> ``checks`` -> ``analysis`` (pure, no I/O);
``transport`` runs the standard-library probes of ``remote`` on a host and never
imports ``analysis``. See README.md and docs/raw-facts.md.
"""

__version__ = "0.1.0"
