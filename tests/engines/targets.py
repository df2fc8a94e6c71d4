"""The architecture section the serving analysis reads, built by the real config rules from a few keys.

``analysis/serving`` takes the typed ``Architecture`` (documents/profile_architecture.py); these tests
need only a target's class names, its MTP layer count and the drafters found beside it, so the section
comes from ``architecture_section`` on a config holding just those keys, with the speculative facts set.
"""

from __future__ import annotations

from introspect.analysis.architecture.section import architecture_section
from introspect.documents.profile_architecture import Architecture, Drafter


def drafter(kind: str, path: str) -> Drafter:
    """A readable drafter directory of ``kind`` beside the model, its config's numbers unknown."""
    return Drafter(error=None, path=path, kind=kind, architectures=None, num_layers=None, hidden_size=None,
                   block_size=None, target_layer_ids=None, num_target_layers=None, mask_token_id=None,
                   draft_vocab_size=None, vocab_size=None)


def target(architecture: str, model_type: str | None = None, *, mtp_layers: int = 0,
           drafters: list[Drafter] | None = None) -> Architecture:
    config = {"architectures": [architecture], **({"model_type": model_type} if model_type else {})}
    arch = architecture_section(config)[0]
    arch.speculative.mtp_layers = mtp_layers
    arch.speculative.drafters = list(drafters or [])
    return arch
