"""The drafter configs ``--emit-drafter-config`` writes load with the reference drafter classes.

SpecForge 0.2.0 (tests/fixtures/specforge_venv.py: the PyPI package, ``--no-deps``) reads each
emitted file with its own loader (``training/model_loading.py`` ``load_draft_config_source``: the
registered class's ``config_class.from_dict``) and builds ``DFlashDraftModel`` (a ``Qwen3Config``
model) or ``LlamaForCausalLMEagle3`` (a ``LlamaConfig`` model) on ``torch.device("meta")`` in the torch
test venv. The shapes are read from the built modules (tests/engines/drafter_load_child.py) and
must be the target's, taken from its config.json here, not the config classes' defaults
(transformers 5 ``Qwen3Config``: 32 heads, 32 KV heads, head_dim 128, FFN 22016, 32768 positions;
``LlamaConfig``: FFN 11008, 2048 positions).

The 8-key skeleton introspect wrote before loads too, and builds exactly those defaults: the bug.
All cases load in one subprocess (torch's import is most of the time).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from introspect.analysis.profile import build_profile
from introspect.cli.cmd_plan import DraftShape, drafter_file, profile_document
from tests.fixtures.engine_venv import venv_or_skip
from tests.fixtures.specforge_venv import specforge_path
from tests.fixtures.torch_venv import torch_venv
from tests.fixtures.venvs import venv_python
from tests.golden.cases import DATA, config_raw

pytestmark = pytest.mark.slow
CHILD = Path(__file__).with_name("drafter_load_child.py")

# target -> (its config.json, or a tests/data/families case holding it; the key of its text config)
TARGETS = {
    "kimi": (DATA / "families" / "kimi-k2.5-with-drafters.json", "text_config"),
    "qwen3-8b": (DATA / "families" / "qwen3-8b.json", None),
    "llama-3.1-8b": (DATA / "realconfigs" / "llama-3.1-8b" / "config.json", None),
    "qwen3-next": (DATA / "realconfigs" / "qwen3-next-80b-a3b-thinking" / "config.json", None),  # hybrid: GDN + attention
    "qwen3.5-9b": (DATA / "families" / "qwen3.5-9b.json", "text_config"),  # no RoPE keys in its config
}
CASES = [("kimi", "dflash", "sglang"), ("kimi", "eagle3", "vllm"), ("qwen3-8b", "dflash", "vllm"),
         ("qwen3-8b", "eagle3", "sglang"), ("llama-3.1-8b", "dflash", "sglang"), ("llama-3.1-8b", "eagle3", "vllm"),
         ("qwen3-next", "dflash", "vllm"), ("qwen3-next", "eagle3", "sglang"), ("qwen3.5-9b", "dflash", "sglang")]


def _config(target: str) -> dict[str, Any]:
    path, _ = TARGETS[target]
    data = json.loads(path.read_text())
    return data.get("config", data)


def _text(target: str) -> dict[str, Any]:
    config, nested = _config(target), TARGETS[target][1]
    return config[nested] if nested else config


def expected(target: str) -> dict[str, Any]:
    """The target's shapes read straight from its config.json (MLA: the value head width)."""
    text = _text(target)
    head_dim = text.get("v_head_dim") or text.get("head_dim") or text["hidden_size"] // text["num_attention_heads"]
    return {"heads": text["num_attention_heads"], "kv_heads": text["num_key_value_heads"], "head_dim": head_dim,
            "hidden": text["hidden_size"], "intermediate": text["intermediate_size"],
            "max_positions": text["max_position_embeddings"], "rope_theta": text.get("rope_theta")}


def _skeleton(kind: str) -> dict[str, Any]:
    """The 8-key config introspect wrote before (drafter_plan.py's old ``drafter_config``), for Kimi-K2.5."""
    if kind == "dflash":
        return {"architectures": ["DFlashDraftModel"], "model_type": "qwen3", "hidden_size": 7168,
                "vocab_size": 163840, "num_hidden_layers": 6, "num_target_layers": 61, "block_size": 8,
                "dflash_config": {"target_layer_ids": [1, 12, 24, 35, 47, 58], "mask_token_id": 163838}}
    return {"architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", "hidden_size": 7168,
            "vocab_size": 163840, "draft_vocab_size": 32000, "num_hidden_layers": 1,
            "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 29, 57], "use_aux_hidden_state": True}}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    python = venv_python(venv_or_skip(torch_venv, "torch (CPU wheel)"))
    specforge = venv_or_skip(specforge_path, "specforge")
    where = tmp_path_factory.mktemp("drafters")
    cases = []
    for target, kind, engine in CASES:
        profile = build_profile(config_raw(target, _config(target)))
        path = where / f"{target}-{kind}-{engine}.json"
        path.write_text(json.dumps(drafter_file(profile_document(profile), kind, DraftShape(engine))))
        cases.append({"name": f"{target}/{kind}/{engine}", "path": str(path)})
    for kind in ("dflash", "eagle3"):
        path = where / f"skeleton-{kind}.json"
        path.write_text(json.dumps(_skeleton(kind)))
        cases.append({"name": f"skeleton/{kind}", "path": str(path)})
    env = dict(os.environ, PYTHONPATH=str(specforge), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    result = subprocess.run([str(python), "-B", str(CHILD)], input=json.dumps(cases), capture_output=True,
                            text=True, timeout=240, env=env, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    return dict(json.loads(result.stdout), _files={c["name"]: c["path"] for c in cases})


@pytest.mark.parametrize(("target", "kind", "engine"), [c for c in CASES if c[0] != "qwen3.5-9b"],
                         ids=["/".join(c) for c in CASES if c[0] != "qwen3.5-9b"])
def test_emitted_config_builds_the_targets_shapes(built: dict[str, Any], target: str, kind: str, engine: str) -> None:
    shapes = built[f"{target}/{kind}/{engine}"]
    assert "error" not in shapes, shapes
    want = expected(target)
    for key in ("heads", "kv_heads", "head_dim", "hidden", "intermediate", "max_positions"):
        assert shapes[key] == want[key], (key, shapes[key], want[key])
    assert shapes["rope_theta"] == want["rope_theta"]
    assert shapes["dtype"] == "torch.bfloat16"
    if kind == "dflash":
        assert shapes["cls"] == "specforge.modeling.draft.dflash.DFlashDraftModel"
        assert (shapes["layers"], shapes["taps"], shapes["block_size"]) == (5, 5, 16)
        assert shapes["layer_types"] == ["full_attention"] * 5
    else:
        assert shapes["cls"] == "specforge.modeling.draft.llama3_eagle.LlamaForCausalLMEagle3"
        assert shapes["draft_vocab"] == 32000
        assert shapes["vocab"] == (_text(target).get("vocab_size") or _config(target).get("vocab_size"))


def test_hand_checked_shapes(built: dict[str, Any]) -> None:
    """The same, against the published figures (not read back from the files the emitter read)."""
    llama = built["llama-3.1-8b/eagle3/vllm"]  # Llama-3.1-8B: 32 Q / 8 KV heads of 128, FFN 14336, 128k positions
    assert (llama["heads"], llama["kv_heads"], llama["head_dim"], llama["intermediate"]) == (32, 8, 128, 14336)
    assert llama["max_positions"] == 131072 and llama["rotary"] == "LlamaRotaryEmbedding"
    # vLLM reads EAGLE-3 ids as hidden-states indices: Llama's 32 layers, default taps 1, 15, 28 -> 2, 16, 29.
    assert llama["aux"]["eagle_aux_hidden_state_layer_ids"] == [2, 16, 29]
    qwen = built["qwen3-8b/dflash/vllm"]  # as SpecForge's configs/qwen3-8b-dflash.json: 32 / 8 / 128, FFN 12288
    assert (qwen["heads"], qwen["kv_heads"], qwen["head_dim"], qwen["intermediate"]) == (32, 8, 128, 12288)
    assert qwen["target_layer_ids"] == [1, 9, 17, 25, 33] and qwen["max_positions"] == 40960  # the published ids
    kimi = built["kimi/dflash/sglang"]  # MLA: head_dim = v_head_dim 128, as the published Kimi-K2.5 drafter
    assert (kimi["heads"], kimi["head_dim"], kimi["hidden"], kimi["intermediate"]) == (64, 128, 7168, 18432)
    assert kimi["rope_type"] == "yarn" and kimi["max_positions"] == 262144
    nxt = built["qwen3-next/dflash/vllm"]  # hybrid target: 16 Q / 2 KV heads of 256
    assert (nxt["heads"], nxt["kv_heads"], nxt["head_dim"], nxt["hidden"]) == (16, 2, 256, 2048)


def test_a_field_the_target_lacks_fails_loudly(built: dict[str, Any]) -> None:
    """Qwen3.5-9B's config writes no RoPE keys: rope_theta is emitted null (with the reason), and the
    class fails to build instead of taking Qwen3Config's default theta."""
    config = json.loads(Path(built["_files"]["qwen3.5-9b/dflash/sglang"]).read_text())
    assert config["rope_theta"] is None and "no RoPE settings" in config["introspect"]["notes"]["rope_theta"]
    # The rotary embedding raises on the null base (``base ** ...``): no theta was made up.
    assert "NoneType" in built["qwen3.5-9b/dflash/sglang"]["error"]


def test_the_old_skeleton_takes_another_models_defaults(built: dict[str, Any]) -> None:
    """The bug being fixed: 8 keys load silently, and the rest come from the config classes."""
    dflash, eagle = built["skeleton/dflash"], built["skeleton/eagle3"]
    assert "error" not in dflash and "error" not in eagle
    # Qwen3Config's defaults, not Kimi-K2.5's 64 heads, FFN 18432 and 262144 positions.
    assert (dflash["heads"], dflash["kv_heads"], dflash["head_dim"]) == (32, 32, 128)
    assert (dflash["intermediate"], dflash["max_positions"]) == (22016, 32768)
    assert dflash["heads"] != expected("kimi")["heads"] and dflash["max_positions"] != expected("kimi")["max_positions"]
    # LlamaConfig's: FFN 11008, 2048 positions, RoPE theta 10000 instead of Kimi's yarn over 50000.
    assert (eagle["heads"], eagle["intermediate"], eagle["max_positions"]) == (32, 11008, 2048)
    assert eagle["rope_theta"] == 10000.0
