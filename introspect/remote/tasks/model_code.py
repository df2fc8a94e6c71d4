"""Remote task "model_code": the model's own config class and code as witnesses of its architecture.

Runs on the host in its own interpreter process, supervised like the tokenizer load
(:mod:`introspect.remote.supervisor`: own timeout, own process group, private caches,
``HF_HUB_OFFLINE=1``). Standard library at import time (Python 3.8+); transformers and
torch are imported inside :func:`run` only, so a venv without them yields a classified
error. :func:`run` never raises.

Two witnesses, as far as the venv allows:

- the config class (transformers alone): ``AutoConfig.from_pretrained(path,
  trust_remote_code=...)``, or the installed transformers' own class for the
  ``model_type`` when the model's auto_map code cannot be loaded
  (:mod:`..facts.model_code_config`); its attributes and its ``to_dict()`` with the
  per-layer lists it derives;
- the model on the meta device (torch too: no memory, no weights read) by the first
  Auto class that takes the config, counted (:mod:`..facts.model_code_count`) and
  described layer by layer (:mod:`..facts.model_code_layers`).

With ``trust_remote_code`` false only transformers' built-in classes are used; a model
that needs its own code is then refused, with the reason.

Request: ``{"model_path": str, "trust_remote_code": bool, "memory_limit"?: int}`` (``memory_limit``:
bytes of resident memory, watched by the supervisor: no address-space limit is set here, see
:mod:`introspect.remote.limits`).

Result::

    {
      "built": bool, "class": str | null, "module": str | null, "built_with": str | null,
      "remote_code": bool | null,                # the model class came from the model dir's code
      "torch_version": str | null, "transformers_version": str | null,
      "config": {"class", "module", "layer_types": [runs], "sliding_window", ...} | null,
      "config_dict": {...} | null,               # the class's to_dict() + derived per-layer lists
      "config_fallback": null | {"class", "model_type", "reason"},   # the native class stood in
      "params": null | {"parameters", "buffers", "total", "active", "components": {name: int},
                        "experts_per_token", "moe_layers", "routed_experts", "one_expert"},
      "layers": null | {"path", "count", "runs": [{start, count, class, mixer, ffn, attrs,
                        mixers: [{class, kind, outputs, attrs, tensors}]}]},
      "attempts": [{"with": str, "type": str, "message": str}],   # Auto classes that refused
      "seconds": {"import", "config", "import_torch", "build", "count"}, "peak_rss_kib": int | null,
      "error": null | <error as in the tokenizer task, plus "stage": "import" | "config" | "build" | "count",
                      cause "missing-package" | "remote-code-refused" | "incompatible-code" |
                      "cuda-only" | "exception">,
    }
"""

from __future__ import annotations

import contextlib
import re
import time
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

from ..facts import load_guard
from ..facts.model.model_code_config import config_dict, load_config
from ..facts.model.model_code_count import count_components, decoder_layers, one_expert
from ..facts.model.model_code_layers import config_attrs, experts_per_token, layer_runs, text_config
from ..facts.tokenizer.tokenizer_load import classify_error, short
from ..readers import json_safe

# Auto classes tried in turn: causal LMs, then VLM wrappers, then the bare backbone.
AUTO_CLASSES = ("AutoModelForCausalLM", "AutoModelForImageTextToText", "AutoModel")
_INIT_FUNCTIONS = ("uniform_", "normal_", "constant_", "ones_", "zeros_", "eye_", "dirac_", "xavier_uniform_",
                   "xavier_normal_", "kaiming_uniform_", "kaiming_normal_", "trunc_normal_", "orthogonal_",
                   "sparse_")
# Code that only runs on a GPU says so in a few ways (flash-attn, triton, CUDA builds of torch).
_CUDA_RE = re.compile(r"CUDA|cuda|flash_attn|flash-attn|triton|nvcc|Torch not compiled with CUDA|NVIDIA")


def run(request: Dict[str, Any]) -> Dict[str, Any]:
    """Build and count; see the module docstring."""
    return build_and_count(request)[0]


def precheck(request: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """The result when transformers cannot be found, else None (run as usual).

    Run by the runner before it starts the isolated child: finding a top-level module
    on ``sys.path`` imports nothing, and the child's path is the same (less its cwd), so
    a venv without transformers costs no child interpreter. The result is the one the
    child would give: the import step failing with ``ModuleNotFoundError``. A venv with
    transformers but no torch still runs the child: the config class speaks without torch.
    """
    import importlib.util

    if importlib.util.find_spec("transformers") is not None:
        return None

    def fail() -> None:
        raise ModuleNotFoundError("No module named 'transformers'", name="transformers")

    result = _empty_result()
    _step(result, "import", fail)
    result["peak_rss_kib"] = _peak_rss()
    return result


def build_and_count(request: Dict[str, Any]) -> Tuple[Dict[str, Any], Any]:
    """(the task's result, the meta model or None): the model for callers that check the counts."""
    result = _empty_result()
    holder: Dict[str, Any] = {}
    try:
        _run(request, result, holder)
    except BaseException as exc:  # noqa: BLE001 - the report must always come back
        if isinstance(exc, KeyboardInterrupt):
            raise
        if result["error"] is None:
            result["error"] = _error(exc, "count")
    result["peak_rss_kib"] = _peak_rss()
    out = json_safe(result)
    return (out if isinstance(out, dict) else result), holder.get("model")


def _empty_result() -> Dict[str, Any]:
    return {"built": False, "class": None, "module": None, "built_with": None, "remote_code": None,
            "torch_version": None, "transformers_version": None, "config": None, "config_dict": None,
            "config_fallback": None, "params": None, "layers": None, "attempts": [], "seconds": {},
            "peak_rss_kib": None, "error": None}


def _error(exc: BaseException, stage: str) -> Dict[str, Any]:
    error: Dict[str, Any] = dict(classify_error(exc))
    error["stage"] = stage
    if "does not recognize this architecture" in error["message"] or "Unrecognized model" in error["message"]:
        error["cause"], error["missing_packages"] = "unknown-architecture", []
    elif error["cause"] in ("exception", "incompatible-code") and _CUDA_RE.search(error["message"]):
        error["cause"] = "cuda-only"
    return error


def _step(result: Dict[str, Any], stage: str, step: Callable[[], Any], timer: str = "") -> Tuple[bool, Any]:
    """(True, value), or (False, None) with the classified error; the time in ``seconds``."""
    started = time.monotonic()
    try:
        return True, step()
    except BaseException as exc:  # noqa: BLE001
        if isinstance(exc, KeyboardInterrupt):
            raise
        result["error"] = _error(exc, stage)
        return False, None
    finally:
        result["seconds"][timer or stage] = round(time.monotonic() - started, 3)


def _run(request: Dict[str, Any], result: Dict[str, Any], holder: Dict[str, Any]) -> None:
    path = str(request["model_path"])
    refused = load_guard.refusal(path)
    if refused is not None:  # AutoConfig and the model's code would follow the link
        result["error"] = dict(refused, stage="config")
        return
    with load_guard.loadable(path) as loadable:
        _build_and_describe(request, loadable, result, holder)


def _build_and_describe(request: Dict[str, Any], path: str, result: Dict[str, Any], holder: Dict[str, Any]) -> None:
    trust = bool(request.get("trust_remote_code", False))
    ok, transformers = _step(result, "import", _import_transformers)
    if not ok:
        return
    result["transformers_version"] = getattr(transformers, "__version__", None)
    # Witness 2a: the config class, torch or not.
    ok, loaded = _step(result, "config", lambda: load_config(transformers, path, trust))
    if not ok:
        return
    config, result["config_fallback"] = loaded
    text = text_config(config)
    result["config"] = config_attrs(text)
    result["config_dict"] = config_dict(config)
    # Witness 2b: the model on the meta device, where torch imports too.
    ok, torch = _step(result, "import", _import_torch, "import_torch")
    if not ok:
        return
    result["torch_version"] = getattr(torch, "__version__", None)
    if result["config_fallback"] is not None:
        trust = False  # the native classes only: the model's own files are not there
    ok, built = _step(result, "build", lambda: _build(torch, transformers, config, trust, result["attempts"]))
    if not ok:
        return
    model, auto_name = built
    holder["model"] = model
    result.update({"built": True, "class": type(model).__name__, "module": type(model).__module__,
                   "built_with": auto_name, "remote_code": type(model).__module__.startswith("transformers_modules")})
    _step(result, "count", lambda: _describe(model, text, result))


def _import_transformers() -> Any:
    import transformers

    return transformers


def _import_torch() -> Any:
    import torch  # type: ignore[import-not-found]  # only in the target venv

    return torch


def _build(torch: Any, transformers: Any, config: Any, trust: bool,
           attempts: List[Dict[str, Any]]) -> Tuple[Any, str]:
    """The model on the meta device, from the first Auto class that takes the config; the
    text config alone as the last resort (a wrapper whose classes are not registered)."""
    last: Optional[BaseException] = None
    for candidate, auto_name in _candidates(config):
        auto = getattr(transformers, auto_name, None)
        if auto is None:
            continue
        try:
            with torch.device("meta"), _no_init(torch):
                return _from_config(auto, candidate, trust), auto_name + ("" if candidate is config else "(text)")
        except (ValueError, KeyError, TypeError) as exc:  # this Auto class does not map this config
            attempts.append({"with": auto_name, "type": type(exc).__name__, "message": short(str(exc), 300)})
            last = exc
    raise last if last is not None else RuntimeError("no Auto class of transformers takes this config")


@contextlib.contextmanager
def _no_init(torch: Any) -> Iterator[None]:
    """torch.nn.init's fills as no-ops: meta tensors hold no values, and 23k expert Linears
    (Kimi-K2's code keeps experts in a ModuleList) would otherwise each run kaiming_uniform_."""
    init = torch.nn.init
    saved = {name: getattr(init, name) for name in _INIT_FUNCTIONS if hasattr(init, name)}
    try:
        for name in saved:
            setattr(init, name, _keep)
        yield
    finally:
        for name, function in saved.items():
            setattr(init, name, function)


def _keep(tensor: Any, *_args: Any, **_kwargs: Any) -> Any:
    return tensor


def _candidates(config: Any) -> List[Tuple[Any, str]]:
    names = list(AUTO_CLASSES)
    if getattr(config, "vision_config", None) is not None:
        # A VLM's causal-LM mapping may be its text model alone; the stored model has the tower.
        names.insert(0, names.pop(names.index("AutoModelForImageTextToText")))
    out = [(config, name) for name in names]
    text = text_config(config)
    if text is not config:
        out.append((text, "AutoModelForCausalLM"))
    return out


def _from_config(auto: Any, config: Any, trust: bool) -> Any:
    # Eager attention: a config asking for flash-attention must not need its kernels to be counted.
    try:
        return auto.from_config(config, trust_remote_code=trust, attn_implementation="eager")
    except TypeError:
        return auto.from_config(config, trust_remote_code=trust)


def _describe(model: Any, text: Any, result: Dict[str, Any]) -> None:
    num_layers = getattr(text, "num_hidden_layers", None)
    num_layers = num_layers if isinstance(num_layers, int) and num_layers > 0 else None
    counts = count_components(model, num_layers)
    path, layers = decoder_layers(model, num_layers)
    main_layers = layers[:num_layers] if num_layers else layers
    per_layer = counts.pop("per_layer")
    experts = one_expert(main_layers, per_layer)
    k = experts_per_token(text)
    counts.update(_active(model, counts, experts, k))
    result["params"] = counts
    result["layers"] = {"path": path, "count": len(main_layers), "runs": layer_runs(main_layers),
                        "extra": len(layers) - len(main_layers)}


def _active(model: Any, counts: Dict[str, Any], experts: Dict[int, Tuple[int, int]],
            k: Optional[int]) -> Dict[str, Any]:
    """Active parameters per token: everything a text token multiplies by (the head, also when
    tied; not the embedding lookup, the vision tower or MTP layers), with ``k`` routed experts
    of each MoE layer instead of all of them."""
    parts = counts["components"]
    skipped = ("embedding", "vision", "audio", "mtp", "experts_routed")
    active = sum(v for name, v in parts.items() if name not in skipped)
    routed_active = None
    if experts and k:
        routed_active = sum(min(k, count) * one for count, one in experts.values())
        active += routed_active
    elif parts.get("experts_routed"):
        active = None  # routed experts without a known top-k: no honest number
    if active is not None and _head_is_embedding(model):
        active += int(model.get_input_embeddings().weight.numel())  # the tied head multiplies every token
    counts_one = sorted({one for _, one in experts.values()})
    return {"active": active, "experts_per_token": k, "moe_layers": len(experts),
            "routed_experts": sorted({count for count, _ in experts.values()}),
            "one_expert": counts_one[0] if len(counts_one) == 1 else counts_one or None,
            "routed_active": routed_active}


def _head_is_embedding(model: Any) -> bool:
    """Whether the output head's weight is the input embedding's (tied, so counted there once)."""
    try:
        head = model.get_output_embeddings()
        return head is not None and head.weight is model.get_input_embeddings().weight
    except Exception:  # noqa: BLE001 - no standard embeddings: nothing to add
        return False


def _peak_rss() -> Optional[int]:
    try:
        import resource

        return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)  # KiB on Linux
    except Exception:  # noqa: BLE001
        return None
