"""`introspect probe` over a real sshd with torch in the venv: the three witnesses in --json and the report.

The Kimi-like fixture carries a buildable modeling_deepseek.py (tests/fixtures/kimi_modeling.py:
the module layout of the code Kimi-K2-Instruct ships, its routed experts fused into 3-D parameters
so the build takes a second, not ten), so witness 2 is built from the model dir's own code through
trust_remote_code, in the isolated model_code process on the host.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_cli, ssh_flags
from tests.fixtures.engine_venv import venv_or_skip
from tests.fixtures.kimi_model import build_kimi_model
from tests.fixtures.torch_venv import torch_venv

pytestmark = pytest.mark.ssh

# DeepSeek-V3 code over Kimi-K2-Instruct's config.json (61 layers, 384 experts, 8 per token): every
# parameter of the built model, the e_score_correction_bias parameters included.
KIMI_TOTAL = 1026408232448
KIMI_ACTIVE = 31687095808  # 8 x 44,040,192 per expert in 60 MoE layers + everything else but the embedding


@pytest.fixture(scope="module")
def probed(sshd, client_keys, tmp_path_factory):
    venv = venv_or_skip(torch_venv, "torch")
    root = tmp_path_factory.mktemp("witness")
    model = build_kimi_model(root / "Kimi-K2-Instruct", variant="k2-instruct", model_code="fused")
    raw_file = root / "raw.json"
    result = run_cli("probe", *ssh_flags(sshd, client_keys), "--model", str(model), "--venv", str(venv),
                     "--no-tokenizer", "--json", "--save-raw", str(raw_file))
    assert result.code == 0, (result.stdout[-3000:], result.stderr[-3000:])
    return result.json(), raw_file


def test_json_carries_every_witness(probed) -> None:
    profile, _ = probed
    params = profile["architecture"]["params"]
    code = params["sources"]["model_code"]
    assert code["status"] == "built" and code["remote_code"] is True
    assert code["class"] == "DeepseekV3ForCausalLM" and code["built_with"] == "AutoModelForCausalLM"
    assert (code["total"], code["active"]) == (KIMI_TOTAL, KIMI_ACTIVE)
    assert code["experts_per_token"] == 8 and code["moe_layers"] == 60 and code["one_expert"] == 44040192
    config = params["sources"]["config"]
    assert abs(config["total"] - KIMI_TOTAL) <= 0.01 * KIMI_TOTAL  # the rules agree within 1%
    assert params["sources"]["weights"] is None  # the fixture has no weights
    assert (params["total"], params["source"], params["active_source"]) == (KIMI_TOTAL, "model_code", "model_code")
    layers = profile["architecture"]["layers"]["sources"]["model_code"]
    assert [(r["start"], r["count"], r["ffn"]) for r in layers["runs"]] == [(0, 1, "DeepseekV3MLP"),
                                                                         (1, 60, "DeepseekV3MoE")]
    assert not [f for f in profile["findings"] if f["code"] in ("witnesses-disagree", "model-code-failed")]


def test_raw_facts_keep_the_isolated_run(probed) -> None:
    _, raw_file = probed
    raw = json.loads(Path(raw_file).read_text())
    probe = raw["model_code_probe"]
    assert probe["module"].startswith("transformers_modules.") and probe["module"].endswith(".modeling_deepseek")
    assert probe["peak_rss_kib"] > 0 and set(probe["seconds"]) == {"import", "config", "import_torch", "build",
                                                                       "count"}
    assert "model_code.supervisor" in raw["timings"]
    assert raw["options"]["load_model_code"] is True


def test_human_report_shows_the_witnesses(probed) -> None:
    _, raw_file = probed
    result = run_cli("profile", str(raw_file), env={"COLUMNS": "200"})
    assert result.code == 0, result.stderr[-2000:]
    assert "Witnesses" in result.stdout
    assert "DeepseekV3ForCausalLM from the model dir's own code" in result.stdout
    assert "1.03T total, 31.69B active" in result.stdout
    assert "no disagreement between the witnesses that spoke" in result.stdout
