"""Mistral / Meta native ``params.json`` as a Hugging Face style config (stdlib, Python 3.8+).

Mistral-format checkpoints (``params.json`` + ``consolidated*.safetensors`` +
``tekken.json`` or ``tokenizer.model.v*``, served by vLLM with ``--config-format
mistral``) and Meta's original Llama dirs (``params.json`` + ``consolidated.*.pth`` +
``tokenizer.model``) have no ``config.json``. The architecture analysis reads HF keys,
so the native keys are renamed the way vLLM converts them,
vllm/transformers_utils/configs/mistral.py (``_remap_general_mistral_args``,
``_remap_moe_args``, ``_remap_mistral_mla_args``,
https://github.com/vllm-project/vllm/blob/main/vllm/transformers_utils/configs/mistral.py):

=====================  ==========================  ========================================
params.json            HF key                      where
=====================  ==========================  ========================================
dim                    hidden_size                 _remap_general_mistral_args
n_layers               num_hidden_layers           _remap_general_mistral_args
n_heads                num_attention_heads         _remap_general_mistral_args
n_kv_heads             num_key_value_heads         _remap_general_mistral_args
hidden_dim             intermediate_size           _remap_general_mistral_args
norm_eps               rms_norm_eps                _remap_general_mistral_args
tied_embeddings        tie_word_embeddings         default False
max_seq_len            max_position_embeddings     default 128000 (vLLM's default)
head_dim, vocab_size,  same names                  passed through
rope_theta,
sliding_window
moe.num_experts        num_local_experts           Mixtral (no shared experts)
                       / n_routed_experts          Mistral Large 3 (shared experts): deepseek_v3
moe.num_experts_per_tok num_experts_per_tok        _remap_moe_args
moe.expert_hidden_dim  moe_intermediate_size       _remap_moe_args
moe.num_shared_experts n_shared_experts            _remap_moe_args
moe.first_k_dense_replace, route_every_n (moe_layer_freq), routed_scale (routed_scaling_factor),
num_expert_groups (n_group), num_expert_groups_per_tok (topk_group)   _remap_moe_args
q_lora_rank, kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim: MLA, same names
=====================  ==========================  ========================================

model_type / architectures follow vLLM's ``adapt_config_dict``: MoE with shared
experts (or MLA) -> ``deepseek_v3`` / ``MistralLarge3ForCausalLM``; MoE ->
``mixtral`` / ``MixtralForCausalLM``; else ``mistral`` / ``MistralForCausalLM``.
Meta's Llama params (``multiple_of``, ``ffn_dim_multiplier``, no ``hidden_dim``) become
``llama`` / ``LlamaForCausalLM`` with intermediate_size computed as llama_models'
``FeedForward`` does (llama_models/llama3/model.py): ``int(2 * 4 * dim / 3)``, times
ffn_dim_multiplier, rounded up to a multiple of multiple_of.
"""

from __future__ import annotations

from typing import Any, Dict, Optional

GENERAL = (("dim", "hidden_size"), ("n_layers", "num_hidden_layers"), ("n_heads", "num_attention_heads"),
           ("n_kv_heads", "num_key_value_heads"), ("hidden_dim", "intermediate_size"), ("norm_eps", "rms_norm_eps"))
PASSED = ("head_dim", "vocab_size", "rope_theta", "sliding_window", "q_lora_rank", "kv_lora_rank",
          "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")
MOE = (("num_experts_per_tok", "num_experts_per_tok"), ("expert_hidden_dim", "moe_intermediate_size"),
       ("num_shared_experts", "n_shared_experts"), ("first_k_dense_replace", "first_k_dense_replace"),
       ("route_every_n", "moe_layer_freq"), ("routed_scale", "routed_scaling_factor"),
       ("num_expert_groups", "n_group"), ("num_expert_groups_per_tok", "topk_group"))
DEFAULT_MAX_POSITIONS = 128000


def to_hf_config(params: Any) -> Optional[Dict[str, Any]]:
    """The HF-style config of a parsed params.json; None when it is not a model's params."""
    if not isinstance(params, dict) or not all(isinstance(params.get(k), int) for k in ("dim", "n_layers", "n_heads")):
        return None
    out: Dict[str, Any] = {"introspect_config_source": "params.json"}
    for native, hf in GENERAL:
        if native in params:
            out[hf] = params[native]
    for key in PASSED:
        if key in params:
            out[key] = params[key]
    out["num_key_value_heads"] = out.get("num_key_value_heads", params["n_heads"])
    out["tie_word_embeddings"] = bool(params.get("tied_embeddings", False))
    out["max_position_embeddings"] = params.get("max_seq_len", params.get("max_position_embeddings",
                                                                        DEFAULT_MAX_POSITIONS))
    moe = params.get("moe") if isinstance(params.get("moe"), dict) else None
    mla = bool(params.get("qk_nope_head_dim"))
    if moe is not None:
        for native, hf in MOE:
            if native in moe:
                out[hf] = moe[native]
    shared = bool(moe and (moe.get("num_shared_experts") or 0) > 0)
    if shared or mla:
        out.update(model_type="deepseek_v3", architectures=["MistralLarge3ForCausalLM"])
        if moe is not None and "num_experts" in moe:
            out["n_routed_experts"] = moe["num_experts"]
    elif moe is not None:
        out.update(model_type="mixtral", architectures=["MixtralForCausalLM"])
        if "num_experts" in moe:
            out["num_local_experts"] = moe["num_experts"]
    elif "hidden_dim" not in params and isinstance(params.get("multiple_of"), int):
        out.update(model_type="llama", architectures=["LlamaForCausalLM"])
        out["intermediate_size"] = llama_hidden_dim(params["dim"], params["multiple_of"], params.get("ffn_dim_multiplier"))
    else:
        out.update(model_type="mistral", architectures=["MistralForCausalLM"])
    return out


def llama_hidden_dim(dim: int, multiple_of: int, multiplier: Any) -> int:
    """llama_models' FeedForward width (Llama-3 8B: dim 4096, 1024, 1.3 -> 14336)."""
    hidden = int(2 * (4 * dim) / 3)
    if isinstance(multiplier, (int, float)) and not isinstance(multiplier, bool):
        hidden = int(multiplier * hidden)
    return multiple_of * ((hidden + multiple_of - 1) // multiple_of)
