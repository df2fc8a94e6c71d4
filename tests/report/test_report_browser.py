"""``introspect report``'s pages opened in headless Chromium, asserted from the DOM.

One browser for the module (tests/report/browser.py drives Debian's chromium over the DevTools
pipe); each page is written by the real CLI from real documents: the Kimi-K2.6 fixture's saved
raw facts, two hybrid golden profiles, a plan of ``introspect plan --json`` and a 4-host fleet
(``introspect compare --json`` of saved profiles, and a history database of five health runs:
tests/report/fleet_data.py). What the page draws is compared with the documents' numbers and
with the upstream rules they come from; every page must load with no request leaving it, draw
something, and stay within 1280 px.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import REPO
from tests.report import fleet_data
from tests.report.browser import WIDTH, Browser, missing_reason, png_size
from tests.report.cli import introspect

GOLDEN = REPO / "tests/data/golden"
REAL = REPO / "tests/data/realconfigs"
KIMI_RAW = GOLDEN / "raw/kimi-k2.6-loaded.json"
INT4_PROFILE = GOLDEN / "profiles/raw-kimi-k25-int4-8shards.json"  # its safetensors headers were read: layouts
QWEN3_NEXT = GOLDEN / "profiles/real-qwen3-next-80b-a3b-thinking.json"
JAMBA = GOLDEN / "profiles/real-jamba-1.5-mini.json"
PAGES = ("kimi", "hybrid", "plan", "fleet")

CELLS = """[...document.querySelectorAll('#SECTION g.layer')].map(g => ({
  index: +g.dataset.layer, kind: g.dataset.kind, moe: g.dataset.moe,
  kv: g.dataset.kvBytesPerToken === undefined ? null : +g.dataset.kvBytesPerToken,
  state: g.dataset.stateBytes === undefined ? null : +g.dataset.stateBytes,
  taps: (g.dataset.taps || '').split(' ').filter(Boolean).sort(),
  drawn: [...g.querySelectorAll('[data-tap]')].map(p => p.dataset.tap).sort()}))"""


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    reason = missing_reason()
    if reason:
        pytest.skip(reason)
    started = Browser()
    yield started
    started.close()


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The four pages, each written by ``introspect report``, and the documents they were made of."""
    folder = tmp_path_factory.mktemp("report")
    out: dict[str, Any] = {"folder": folder}
    plan = introspect("plan", str(INT4_PROFILE), "--gpus", "8", "--gpu", "H200", "--json")
    assert plan.code == 0, plan.stderr
    (folder / "plan.json").write_text(plan.stdout)
    out["plan"] = plan.json()
    out["scenario"] = fleet_data.history_db(folder / "history.sqlite3")
    files = fleet_data.profiles(folder)
    compare = introspect("compare", *map(str, files), "--json")
    assert compare.code == 3, compare.stderr  # gpu3 is unreachable
    (folder / "compare.json").write_text(compare.stdout)
    out["compare"] = compare.json()
    for name, args in (("kimi", [str(KIMI_RAW)]), ("hybrid", [str(QWEN3_NEXT), str(JAMBA)]),
                       ("plan", [str(folder / "plan.json")]),
                       ("fleet", [str(folder / "compare.json"), "--db", str(folder / "history.sqlite3")])):
        result = introspect("report", *args, "-o", str(folder / f"{name}.html"))
        assert result.code == 0 and result.stdout == "", result.stderr
        assert f"wrote {folder / name}.html" in result.stderr
    return out


@pytest.fixture(scope="module")
def opened(browser: Browser, made: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each page loaded once: the requests it made, its screenshot, and what its DOM says."""
    seen: dict[str, dict[str, Any]] = {}
    for name in PAGES:
        requests = browser.open(made["folder"] / f"{name}.html")
        shot = browser.screenshot()
        seen[name] = {"requests": requests, "png": shot, "ink": browser.ink(shot), "dom": _dom(browser, name)}
    return seen


def _dom(browser: Browser, name: str) -> dict[str, Any]:
    browser.call("Page.bringToFront", session=browser.session)
    dom = {"width": browser.evaluate("[document.documentElement.scrollWidth, document.documentElement.clientWidth, "
                                     "Math.max(...[...document.querySelectorAll('body *')]"
                                     ".map(e => e.getBoundingClientRect().right))]")}
    if name in ("kimi", "hybrid"):
        dom["cells"] = {section: browser.evaluate(CELLS.replace("SECTION", section)) for section in ("model-1", "model-2")}
        dom["mtp"] = browser.evaluate("document.querySelectorAll('#model-1 g.mtp').length")
    if name == "plan":
        dom["bars"] = browser.evaluate(PLAN_BARS)
    if name == "fleet":
        dom["odd"] = browser.evaluate("[...document.querySelectorAll('table.matrix td[data-odd=true]')]"
                                      ".map(td => [td.closest('tr').dataset.host, td.dataset.fact])")
        dom["rows"] = browser.evaluate("[...document.querySelectorAll('table.matrix tbody tr')].map(r => r.dataset.host)")
        dom["health"] = browser.evaluate("[...document.querySelectorAll('g.health-cell')].map(g => "
                                         "[g.dataset.host, +g.dataset.run, g.dataset.status, g.dataset.changed || ''])")
        dom["changes"] = browser.evaluate("[...document.querySelectorAll('table.changes tbody tr')]"
                                          ".map(r => [...r.cells].map(c => c.textContent))")
    return dom


PLAN_BARS = """(() => {
  const memory = document.querySelector('line.b-memory').getBoundingClientRect().x;
  return [...document.querySelectorAll('g.layout')].map(g => {
    const seg = {};
    for (const r of g.querySelectorAll('rect[data-segment]')) {
      const box = r.getBoundingClientRect(); seg[r.dataset.segment] = {x: box.x, w: box.width, bytes: +r.dataset.bytes};
    }
    return {name: g.dataset.layout, fits: g.dataset.fits, memory: +g.dataset.memory, weights: +g.dataset.weights,
            kv: +g.dataset.kvRoom, headroom: +g.dataset.headroom, over: +g.dataset.over,
            context: g.dataset.maxContext === undefined ? null : +g.dataset.maxContext,
            concurrency: g.dataset.concurrency === undefined ? null : +g.dataset.concurrency, memoryX: memory, seg};
  });
})()"""


# --------------------------------------------------------------------------- model pages


def test_kimi_layer_map_from_raw_facts(opened: dict[str, dict[str, Any]]) -> None:
    """The Kimi-K2.6 fixture (raw facts, profiled on the fly): one cell per decoder layer, all full
    attention (MLA), the dense/MoE marks of DeepSeek-V3's rule, the KV of MLA's latent, the taps."""
    config = json.loads(KIMI_RAW.read_text())["files"]["config"]["text_config"]
    cells = opened["kimi"]["dom"]["cells"]["model-1"]
    n = config["num_hidden_layers"]
    assert [c["index"] for c in cells] == list(range(n)) and n == 61
    assert {c["kind"] for c in cells} == {"full_attention"}
    # vLLM deepseek_v2.py DeepseekV2DecoderLayer.__init__: a layer is MoE when n_routed_experts is set,
    # layer_idx >= first_k_dense_replace and layer_idx % moe_layer_freq == 0; else a dense MLP.
    first, freq = config["first_k_dense_replace"], config["moe_layer_freq"]
    assert [c["moe"] == "true" for c in cells] == [i >= first and i % freq == 0 for i in range(n)]
    # MLA caches one latent of kv_lora_rank plus the rope key per token and layer (vLLM's MLA
    # backends: kv_lora_rank + qk_rope_head_dim elements), bf16 = 2 bytes each.
    assert {c["kv"] for c in cells} == {(config["kv_lora_rank"] + config["qk_rope_head_dim"]) * 2}
    profile = introspect("profile", str(KIMI_RAW), "--json").json()
    _assert_taps(cells, profile["architecture"]["speculative"]["drafter_plan"], n)
    assert opened["kimi"]["dom"]["mtp"] == 0  # num_nextn_predict_layers = 0: no MTP cell


def _assert_taps(cells: list[dict[str, Any]], plan: dict[str, Any], n: int) -> None:
    """The taps drawn on exactly the cells the profile's drafter plan names, which are SGLang's rules:
    DFlash build_target_layer_ids (sglang/srt/speculative/dflash_utils.py) spreads k taps as
    round(1 + i * (n - 4) / (k - 1)); EAGLE-3 captures before hidden states [2, n // 2, n - 3]
    (sglang/srt/models/llama.py set_eagle3_layers_to_capture), i.e. decoder outputs [1, n // 2 - 1, n - 4]."""
    dflash, eagle3 = plan["dflash"]["target_layer_ids"], plan["eagle3"]["aux_layer_ids"]
    k = len(dflash)
    assert k > 1 and dflash == [round(1 + i * (n - 4) / (k - 1)) for i in range(k)]
    assert eagle3 == [1, n // 2 - 1, n - 4]
    assert [c["index"] for c in cells if "dflash" in c["taps"]] == dflash
    assert [c["index"] for c in cells if "eagle3" in c["taps"]] == eagle3
    assert all(c["taps"] == c["drawn"] for c in cells)  # each tap is drawn on its own cell


def test_hybrid_layer_maps(opened: dict[str, dict[str, Any]]) -> None:
    """Qwen3-Next (Gated DeltaNet + full attention, all MoE) and Jamba (Mamba + attention, MoE every
    other layer), their kinds and MoE marks by the upstream rules over the real configs."""
    qwen = json.loads((REAL / "qwen3-next-80b-a3b-thinking/config.json").read_text())
    cells = opened["hybrid"]["dom"]["cells"]["model-1"]
    n = qwen["num_hidden_layers"]
    # transformers configuration_qwen3_next.py: layer_types = "linear_attention" if (i + 1) %
    # full_attention_interval else "full_attention" (the linear layers are Qwen3NextGatedDeltaNet).
    assert [c["kind"] for c in cells] == ["full_attention" if (i + 1) % qwen["full_attention_interval"] == 0
                                          else "gated_deltanet" for i in range(n)]
    # modeling_qwen3_next.py Qwen3NextDecoderLayer: sparse MoE where layer_idx is not in mlp_only_layers
    # and (layer_idx + 1) % decoder_sparse_step == 0.
    assert [c["moe"] == "true" for c in cells] == [i not in qwen["mlp_only_layers"]
                                                   and (i + 1) % qwen["decoder_sparse_step"] == 0 for i in range(n)]
    assert all((c["state"] is not None) == (c["kind"] == "gated_deltanet") for c in cells)  # the GDN state
    assert all((c["kv"] is not None) == (c["kind"] == "full_attention") for c in cells)
    _assert_taps(cells, json.loads(QWEN3_NEXT.read_text())["architecture"]["speculative"]["drafter_plan"], n)
    jamba = json.loads((REAL / "jamba-1.5-mini/config.json").read_text())
    cells = opened["hybrid"]["dom"]["cells"]["model-2"]
    n = jamba["num_hidden_layers"]
    # transformers configuration_jamba.py: layers_block_type is "attention" where i % attn_layer_period ==
    # attn_layer_offset, else "mamba"; layers_num_experts is num_experts where i % expert_layer_period ==
    # expert_layer_offset, else 1 (a dense MLP).
    assert [c["kind"] for c in cells] == ["full_attention" if i % jamba["attn_layer_period"] == jamba["attn_layer_offset"]
                                          else "mamba" for i in range(n)]
    assert [c["moe"] == "true" for c in cells] == [i % jamba["expert_layer_period"] == jamba["expert_layer_offset"]
                                                   for i in range(n)]
    _assert_taps(cells, json.loads(JAMBA.read_text())["architecture"]["speculative"]["drafter_plan"], n)


# --------------------------------------------------------------------------- plan page


def test_plan_bars_equal_the_plan(opened: dict[str, dict[str, Any]], made: dict[str, Any]) -> None:
    plan = made["plan"]
    bars = {bar["name"]: bar for bar in opened["plan"]["dom"]["bars"]}
    memory = plan["gpus"]["memory_bytes"]
    assert list(bars) == [layout["name"] for layout in plan["layouts"]]
    for layout in plan["layouts"]:
        bar = bars[layout["name"]]
        assert (bar["weights"], bar["kv"], bar["memory"]) == (layout["weight_bytes_per_gpu"],
                                                              layout["kv_room_bytes_per_gpu"], memory)
        assert bar["fits"] == ("true" if layout["fits"] else "false")
        assert (bar["context"], bar["concurrency"]) == (layout["max_context_fits"], layout["concurrent_requests"])
        assert bar["headroom"] == max(0, memory - layout["weight_bytes_per_gpu"] - layout["kv_room_bytes_per_gpu"])
        if layout["fits"]:  # what the engine leaves beside the pool: (1 - fraction) of the GPU
            assert bar["headroom"] == memory - layout["usable_bytes_per_gpu"]
        # Drawn to scale: the segments end where their bytes say, against the GPU's memory line.
        start = bar["seg"]["weights"]["x"]
        for name, size in (("weights", bar["weights"]), ("kv", bar["kv"]), ("headroom", bar["headroom"])):
            if size and layout["weight_bytes_per_gpu"] <= memory:
                assert bar["seg"][name]["w"] == pytest.approx((bar["memoryX"] - start) * size / memory, rel=0.01, abs=0.6)
    assert [name for name, bar in bars.items() if bar["over"]] == [
        layout["name"] for layout in plan["layouts"] if layout["weight_bytes_per_gpu"] > memory]
    assert plan["best"] == "TP8" and bars["TP8"]["fits"] == "true"


# --------------------------------------------------------------------------- fleet page


def test_fleet_matrix_marks_exactly_the_hosts_that_differ(opened: dict[str, dict[str, Any]],
                                                        made: dict[str, Any]) -> None:
    dom = opened["fleet"]["dom"]
    assert sorted(map(tuple, dom["odd"])) == [("gpu2", "transformers"), ("gpu4", "chat_template")]
    assert sorted(map(tuple, dom["odd"])) == sorted((row["label"], key) for row in made["compare"]["rows"]
                                                    for key in row["odd"])
    assert dom["rows"] == ["gpu3", "gpu1", "gpu2", "gpu4"]  # the unreachable host first


def _status(results: list[Any]) -> str:
    """A host's state in one run, from what the run recorded: unreachable, else the worst check."""
    if any(r.check == "reachable" and r.status == "fail" for r in results):
        return "unreachable"
    return next((s for s in ("fail", "warn") if any(r.status == s for r in results)), "pass")


def test_fleet_health_over_time(opened: dict[str, dict[str, Any]], made: dict[str, Any]) -> None:
    scenario = made["scenario"]
    cells = opened["fleet"]["dom"]["health"]
    expected = [[host, scenario.run_ids[run - 1], _status(scenario.results[(host, run)]),
                 "true" if any(r.check.startswith("drift:") for r in scenario.results[(host, run)]) else ""]
                for host in ("gpu3", "gpu4", "gpu1", "gpu2") for run in range(1, fleet_data.RUNS + 1)]
    assert cells == expected
    assert [c[2] for c in cells if c[0] == "gpu3"][-2:] == ["unreachable", "unreachable"]
    gpu4 = [c[2] for c in cells if c[0] == "gpu4"]
    assert gpu4[0] != "fail" and gpu4[1:] == ["fail"] * 4  # package:tiktoken fails once it is uninstalled
    changes = opened["fleet"]["dom"]["changes"]
    assert any(row[2] == "gpu2" and row[4] == "upgraded" and row[5].startswith("transformers ")
               and row[5].endswith(fleet_data.UPGRADED) for row in changes), changes
    assert any(row[2] == "gpu4" and row[4] == "removed" and row[5].startswith("tiktoken ") for row in changes)
    assert any(row[2] == "gpu3" and row[4] == "host-unreachable" for row in changes)


# --------------------------------------------------------------------------- every page


@pytest.mark.parametrize("name", PAGES)
def test_page_is_offline_drawn_and_within_1280_px(opened: dict[str, dict[str, Any]], name: str) -> None:
    page = opened[name]
    assert page["requests"] == []  # no request, socket or event stream leaves the page
    assert png_size(page["png"])[0] == WIDTH
    assert page["ink"]["ink"] > 0.05 and page["ink"]["colours"] >= 8, page["ink"]  # not a blank page
    scroll_width, client_width, rightmost = page["dom"]["width"]
    assert scroll_width <= client_width == WIDTH and rightmost <= WIDTH


def test_dark_mode_and_print(browser: Browser, made: dict[str, Any], opened: dict[str, dict[str, Any]]) -> None:
    browser.open(made["folder"] / "kimi.html")
    light = browser.evaluate("getComputedStyle(document.body).backgroundColor")
    try:
        browser.call("Emulation.setEmulatedMedia", session=browser.session,
                     features=[{"name": "prefers-color-scheme", "value": "dark"}])
        dark = browser.evaluate("[getComputedStyle(document.body).backgroundColor, "
                                "getComputedStyle(document.querySelector('svg text.label:not(.on-dark)')).fill]")
        browser.call("Emulation.setEmulatedMedia", session=browser.session, media="print", features=[])
        printed = browser.evaluate("getComputedStyle(document.querySelector('footer')).display")
    finally:
        browser.call("Emulation.setEmulatedMedia", session=browser.session, media="", features=[])
    assert light == "rgb(255, 255, 255)" and dark == ["rgb(22, 22, 22)", "rgb(232, 232, 232)"]
    assert printed == "none"


def test_the_network_log_sees_a_request(browser: Browser, tmp_path_factory: pytest.TempPathFactory) -> None:
    """The check above can fail: a page that loads an image from elsewhere shows it in the log (the
    browser's proxy on a closed loopback port keeps it from leaving the machine)."""
    page = tmp_path_factory.mktemp("leaky") / "leaky.html"
    page.write_text('<!doctype html><img src="http://10.0.0.1/x.png"><p>leaky</p>')
    assert browser.open(page) == ["http://10.0.0.1/x.png"]
