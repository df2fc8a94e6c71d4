"""The mixer table: names, words, and the formulas each kind carries."""

from __future__ import annotations

import pytest

from introspect.analysis.architecture.config_view import ConfigView
from introspect.analysis.architecture.families import family_of
from introspect.analysis.architecture.kinds import FULL, GDN, KDA, LINEAR, MAMBA, MAMBA2, MLP
from introspect.analysis.architecture.layers import canonical_kind
from introspect.analysis.architecture.mixer_math import LayerCtx
from introspect.analysis.architecture.mixers import (
    FIXED_NAMES,
    MIXERS,
    RECURRENT_KINDS,
    layer_params,
    state_elements,
    words,
)
from introspect.documents.profile_architecture import Attention

ATTENTION = Attention(type="GQA", num_heads=8, num_kv_heads=2, head_dim=64, q_lora_rank=None, kv_lora_rank=None,
                      qk_nope_head_dim=None, qk_rope_head_dim=None, v_head_dim=64, sliding_window=None)


@pytest.mark.parametrize("name", sorted(FIXED_NAMES))
def test_every_fixed_name_means_its_kind_in_any_family(name: str) -> None:
    for recurrent in (LINEAR, GDN, KDA, MAMBA, MAMBA2):
        assert canonical_kind(name, recurrent) == FIXED_NAMES[name]


def test_family_dependent_names() -> None:
    assert canonical_kind("linear_attention", GDN) == GDN
    assert canonical_kind("linear_attention", LINEAR) == LINEAR
    assert canonical_kind("mamba", MAMBA2) == MAMBA2 and canonical_kind("mamba", MAMBA) == MAMBA
    assert canonical_kind("hybrid", MAMBA2) == f"{FULL}+{MAMBA2}"
    assert canonical_kind("no_such_mixer", LINEAR) is None


def test_words() -> None:
    assert words(GDN) == "Gated DeltaNet" and words(FULL) == "full attention"
    assert words(f"{FULL}+{MAMBA2}") == "full attention+mamba2"  # a parallel layer is spelled out


def test_every_recurrent_kind_with_a_state_formula_keeps_a_state() -> None:
    view = ConfigView({"hidden_size": 512, "num_attention_heads": 8, "head_dim": 64,
                       "linear_attn_config": {"num_heads": 8, "head_dim": 64}})
    for kind in RECURRENT_KINDS:
        if MIXERS[kind].state is not None:
            assert state_elements(view, kind, 512) > 0, kind
    assert state_elements(view, FULL, 512) == 0 and state_elements(view, "no_such_mixer", 512) == 0


def test_layer_params_split_attention_and_recurrent() -> None:
    view = ConfigView({"hidden_size": 512})
    ctx = LayerCtx(view, family_of(None), 512, ATTENTION, gated=True, bias=False)
    attention, recurrent = layer_params(ctx, FULL)
    assert attention == 512 * 512 + 2 * 512 * 128 + 512 * 512 and recurrent == 0
    both = layer_params(ctx, f"{FULL}+{MAMBA2}")
    assert both[0] == attention and both[1] > 0
    assert layer_params(ctx, MLP) == (0, 0)
    assert layer_params(ctx, "no_such_mixer") == (attention, 0)  # best effort: counted as attention
