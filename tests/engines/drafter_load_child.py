"""Run by the torch test venv's interpreter (test_drafter_configs_load.py): load drafter configs with
SpecForge's own loader and build each with its drafter class on the meta device; print what was built.

stdin: a JSON list of {"name", "path"}; stdout: one JSON object, name -> the built shapes or
{"error": "..."}. Shapes are read from the built modules (projection widths, layer counts), not
from the config, so a value the class took from its config class's defaults shows as built.
"""

from __future__ import annotations

import json
import sys
import warnings
from typing import Any

warnings.filterwarnings("ignore")  # flash_attn missing, transformers' RoPE validation notes

import specforge.modeling.draft  # noqa: E402,F401  registers DFlashDraftModel and LlamaForCausalLMEagle3
import torch  # noqa: E402
from specforge.modeling.draft.registry import DRAFT_REGISTRY  # noqa: E402
from specforge.training.model_loading import load_draft_config_source  # noqa: E402


def _rope_theta(config: Any) -> Any:
    params = getattr(config, "rope_parameters", None) or {}
    return params.get("rope_theta") if isinstance(params, dict) else None


def _dflash(model: Any) -> dict[str, Any]:
    attn, mlp = model.layers[0].self_attn, model.layers[0].mlp
    head_dim = attn.q_norm.weight.shape[0]
    return {"layers": len(model.layers), "heads": attn.q_proj.out_features // head_dim,
            "kv_heads": attn.k_proj.out_features // head_dim, "head_dim": head_dim,
            "hidden": attn.q_proj.in_features, "intermediate": mlp.gate_proj.out_features,
            "taps": model.fc.in_features // model.fc.out_features, "target_layer_ids": list(model.target_layer_ids),
            "block_size": model.block_size, "max_positions": model.rotary_emb.original_max_seq_len,
            "rope_theta": _rope_theta(model.config), "rope_type": model.rotary_emb.rope_type,
            "layer_types": list(model.layer_types)}


def _eagle3(model: Any) -> dict[str, Any]:
    attn, mlp = model.midlayer.self_attn, model.midlayer.mlp
    return {"layers": 1, "heads": attn.num_heads, "kv_heads": attn.k_proj.out_features // attn.head_dim,
            "head_dim": attn.head_dim, "hidden": attn.o_proj.out_features, "intermediate": mlp.gate_proj.out_features,
            "vocab": model.embed_tokens.num_embeddings, "draft_vocab": model.lm_head.out_features,
            "max_positions": attn.max_position_embeddings, "rope_theta": _rope_theta(model.config),
            "rotary": type(attn.rotary_emb).__name__, "aux": getattr(model.config, "eagle_config", None)}


def build(path: str) -> dict[str, Any]:
    config = load_draft_config_source(path)  # SpecForge's path: DRAFT_REGISTRY[arch].config_class.from_dict
    cls = DRAFT_REGISTRY[config.architectures[0]]
    with torch.device("meta"):
        model = cls(config)
    shapes = _dflash(model) if config.architectures[0] == "DFlashDraftModel" else _eagle3(model)
    return dict(shapes, cls=f"{cls.__module__}.{cls.__name__}", config_class=type(config).__name__,
                dtype=str(getattr(config, "dtype", None)))


def main() -> None:
    out: dict[str, Any] = {}
    for case in json.load(sys.stdin):
        try:
            out[case["name"]] = build(case["path"])
        except Exception as exc:  # noqa: BLE001  reported to the test, which says which case failed how
            out[case["name"]] = {"error": f"{type(exc).__name__}: {exc}"}
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
