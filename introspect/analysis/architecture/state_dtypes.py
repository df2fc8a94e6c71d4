"""The dtypes each serving engine keeps a recurrent layer's state in, and the state's bytes at them.

A linear-attention or SSM layer keeps two tensors per sequence (mixer_math.py): the short-convolution
window (``conv``) and the recurrent matrix (``recurrent``; SGLang's "temporal", vLLM's "ssm"). The
engines do not keep them at the model's dtype alone:

* **SGLang 0.5.23** sizes every linear-state cache with ``mamba2_state_dtype``: conv at
  ``SGLANG_MAMBA_CONV_DTYPE``, default ``bfloat16``
  (https://github.com/sgl-project/sglang/blob/v0.5.23/python/sglang/srt/environ.py#L1628), and the
  recurrent state at ``float32`` unless the config's ``mamba_ssm_dtype`` says otherwise
  (https://github.com/sgl-project/sglang/blob/v0.5.23/python/sglang/srt/configs/mamba_utils.py#L71 and #L80;
  ``--mamba-ssm-dtype`` overrides both); the bytes per request are conv elements x conv itemsize + state
  elements x state itemsize per layer (``mamba_cache_per_req``, mamba_utils.py#L116).
* **vLLM 0.33.0** keeps conv at ``mamba_cache_dtype`` and the recurrent state at ``mamba_ssm_cache_dtype``,
  both ``auto`` by default (https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/config/cache.py#L296):
  ``auto`` is the model dtype for conv, and the conv dtype for the state
  (https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/model_executor/layers/mamba/mamba_utils.py#L104),
  except KDA, whose recurrent state is ``float32`` on ``auto`` (mamba_utils.py#L141), Nemotron-H, whose
  ``auto`` becomes the config's ``mamba_ssm_cache_dtype`` or ``float32``
  (https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/model_executor/models/config.py#L813), and
  Qwen3.5, whose ``auto`` becomes the config's ``mamba_ssm_dtype`` when it has one (models/config.py#L963).

The model dtype vLLM serves is ``bfloat16`` for a ``float32`` (or unstated) config, so the conv window
is 2 bytes an element in both engines. RWKV is served by neither: its state stays at the model's dtype.
"""

from __future__ import annotations

from introspect.analysis.architecture.config_view import ConfigView
from introspect.documents.profile_architecture import KvKind

ENGINES = ("sglang", "vllm")
WIDTHS = {"float32": 4, "bfloat16": 2, "float16": 2}
# The state-dtype rule a mixer follows (mixers.py Mixer.state_rule).
MAMBA_RULE = "mamba"  # Mamba-1/2, Gated DeltaNet, lightning: the engines' mamba defaults
KDA_RULE = "kda"  # KDA: float32 recurrent state in both engines
# vLLM models/config.py MODELS_CONFIG_MAP (#L1251 and #L1259): the architectures whose hook sets the state dtype.
VLLM_NEMOTRON_H = ("NemotronHForCausalLM", "NemotronHPuzzleForCausalLM", "NemotronH_Nano_VL_V2")
VLLM_QWEN3_5 = ("Qwen3_5ForCausalLM", "Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForCausalLM",
                "Qwen3_5MoeForConditionalGeneration")


def served_dtype(view: ConfigView) -> str:
    """The dtype the engines compute in: the config's half dtype, else ``bfloat16`` (vLLM's float32 downcast,
    https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/config/model.py#L2423)."""
    raw = view.get_str("torch_dtype", "dtype")
    dtype = raw.lower().removeprefix("torch.") if raw else None
    return dtype if dtype in ("bfloat16", "float16") else "bfloat16"


def _declared(view: ConfigView, key: str) -> str | None:
    """A state dtype the config names (text config first, then the wrapper), if it is one the engines take."""
    value = view.get_str(key)
    if value is None and isinstance(view.parent.get(key), str):
        value = view.parent[key]
    return value if value in WIDTHS else None


def _architectures(view: ConfigView) -> set[str]:
    names = view.parent.get("architectures") if view.parent else view.data.get("architectures")
    return {n for n in names if isinstance(n, str)} if isinstance(names, list) else set()


def _vllm_recurrent(view: ConfigView, rule: str, conv: str) -> str:
    if rule == KDA_RULE:
        return "float32"
    archs = _architectures(view)
    if archs & set(VLLM_NEMOTRON_H):
        return _declared(view, "mamba_ssm_cache_dtype") or "float32"
    if archs & set(VLLM_QWEN3_5):
        return _declared(view, "mamba_ssm_dtype") or conv
    return conv


def engine_state_dtypes(view: ConfigView, rule: str) -> dict[str, dict[str, str]]:
    """{engine: {"conv": dtype, "recurrent": dtype}} at each engine's defaults for this config."""
    sglang_recurrent = "float32" if rule == KDA_RULE else (_declared(view, "mamba_ssm_dtype") or "float32")
    conv = served_dtype(view)
    return {"sglang": {"conv": "bfloat16", "recurrent": sglang_recurrent},
            "vllm": {"conv": conv, "recurrent": _vllm_recurrent(view, rule, conv)}}


def state_entry(view: ConfigView, rule: str, conv: int, recurrent: int, layers: int) -> KvKind:
    """A recurrent kind's entry: state bytes per layer at the larger engine figure (the one a plan that does
    not name its engine must hold), each engine's own, and the element split and dtypes they come from."""
    dtypes = engine_state_dtypes(view, rule)
    by_engine = {engine: conv * WIDTHS[d["conv"]] + recurrent * WIDTHS[d["recurrent"]]
                 for engine, d in dtypes.items()}
    per_layer = max(by_engine.values())
    return KvKind(layers=layers, state_bytes_per_layer=per_layer, state_bytes_per_sequence=per_layer * layers,
                  state_elements_per_layer={"conv": conv, "recurrent": recurrent},
                  state_dtypes=dtypes, state_bytes_per_layer_by_engine=by_engine)


STATE_FIELDS = ("state_bytes_per_layer", "state_elements_per_layer", "state_dtypes", "state_bytes_per_layer_by_engine")


def rescaled_state(entry: KvKind, layers: int) -> KvKind:
    """A rules entry's state carried over to ``layers`` layers (the model-code witness's count): the fields the
    rules set, and the state per sequence again when they gave one per layer."""
    out = KvKind(layers=layers)
    for name in STATE_FIELDS:
        if name in entry.model_fields_set:
            setattr(out, name, getattr(entry, name))
    if out.state_bytes_per_layer is not None:
        out.state_bytes_per_sequence = out.state_bytes_per_layer * layers
    return out


def by_engine_totals(per_kind: dict[str, KvKind]) -> dict[str, int] | None:
    """Each engine's state bytes per sequence over every kind (kinds without a per-engine figure count at
    their one figure); None when no kind has a per-engine figure."""
    if all(e.state_bytes_per_layer_by_engine is None for e in per_kind.values()):
        return None
    totals = dict.fromkeys(ENGINES, 0)
    for entry in per_kind.values():
        figures = entry.state_bytes_per_layer_by_engine
        for engine in ENGINES:
            if figures is not None:
                totals[engine] += figures[engine] * entry.layers
            else:
                totals[engine] += entry.state_bytes_per_sequence or 0
    return totals
