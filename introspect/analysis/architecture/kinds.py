"""The canonical names of per-layer mixer kinds, as the profile spells them.

Kept apart from :mod:`introspect.analysis.architecture.mixers` (what each kind is) so that the
family table and the formulas can name kinds without importing each other.
"""

from __future__ import annotations

FULL = "full_attention"
SLIDING = "sliding_attention"
GDN = "gated_deltanet"
KDA = "kda"
LINEAR = "linear_attention"
MAMBA = "mamba"
MAMBA2 = "mamba2"
MLP = "mlp"
CONV = "conv"
CHUNKED = "chunked_attention"
RWKV = "rwkv"
CSA = "compressed_sparse_attention"
HCA = "heavily_compressed_attention"
# Read off a built model only (the meta-device witness): attention over another input (an image, an
# encoder) whose K/V are cached once per sequence, not per token; a recurrent mixer of no known kind.
CROSS = "cross_attention"
RECURRENT = "recurrent"
