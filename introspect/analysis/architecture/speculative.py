"""Speculative-decoding support: MTP layers in the model, drafters beside it.

A drafter directory is recognised by its config: DFlash (``DFlashDraftModel``,
``dflash_config`` with block size, target layer ids and mask token), EAGLE-3
(``*Eagle3*`` architectures, ``draft_vocab_size``, ``eagle_config`` with the
auxiliary hidden-state layer ids), EAGLE, or a stand-alone MTP / NextN head.
The speculators packaging nests the same facts under ``speculators_config`` and
``transformer_layer_config``; both layouts are read.
"""

from __future__ import annotations

from introspect.analysis.architecture.config_view import MAX_LAYERS, ConfigView, positive, sanitize
from introspect.analysis.architecture.params import mtp_layer_count
from introspect.documents.profile_architecture import Drafter, Speculative

MAX_DRAFTERS = 64


def _kind(config: ConfigView, archs: list[str]) -> str:
    names = " ".join(archs).lower()
    spec_type = (config.get_str("speculators_model_type") or "").lower()
    algorithm = ""
    spec = config.sub("speculators_config")
    if spec is not None:
        algorithm = (spec.get_str("algorithm") or "").lower()
    tags = f"{names} {spec_type} {algorithm}"
    if "dflash" in tags or config.present("dflash_config"):
        return "dflash"
    if "eagle3" in tags or "eagle-3" in tags or config.present("draft_vocab_size", "eagle_config"):
        return "eagle3"
    if "eagle" in tags:
        return "eagle"
    if "mtp" in tags or "nextn" in tags or (config.get_int("num_nextn_predict_layers") or 0) > 0:
        return "mtp"
    return "unknown"


def _first_int(views: list[ConfigView | None], *keys: str) -> int | None:
    for view in views:
        if view is not None:
            value = view.get_int(*keys)
            if value is not None:
                return value
    return None


def _first_ids(views: list[ConfigView | None], *keys: str) -> list[int] | None:
    for view in views:
        if view is not None:
            value = view.get_int_list(*keys, maximum=MAX_LAYERS)
            if value is not None:
                return value
    return None


def describe_drafter(entry: object) -> Drafter | None:
    """One drafter directory's facts (the remote side's ``{path, config}`` record, as read), or None
    when the entry is not a drafter record."""
    if not isinstance(entry, dict):
        return None
    path = entry.get("path") if isinstance(entry.get("path"), str) else None
    raw = sanitize(entry.get("config"))
    if not isinstance(raw, dict):
        return Drafter(error="drafter config is not a JSON object", path=path, kind="unknown", architectures=None,
                       num_layers=None, hidden_size=None, block_size=None, target_layer_ids=None,
                       num_target_layers=None, mask_token_id=None, draft_vocab_size=None, vocab_size=None)
    config = ConfigView(raw)
    archs = config.get_str_list("architectures") or []
    dflash = config.sub("dflash_config")
    eagle = config.sub("eagle_config")
    layer_cfg = config.sub("transformer_layer_config")
    views = [dflash, eagle, config, layer_cfg]
    target_ids = _first_ids(
        views, "target_layer_ids", "eagle_aux_hidden_state_layer_ids", "aux_hidden_state_layer_ids"
    )
    return Drafter(
        error=None,
        path=path,
        kind=_kind(config, archs),
        architectures=archs,
        num_layers=_first_int([config, layer_cfg], "num_hidden_layers", "num_layers"),
        hidden_size=_first_int([config, layer_cfg], "hidden_size"),
        block_size=positive(_first_int(views, "block_size")),
        target_layer_ids=target_ids,
        num_target_layers=_first_int(views, "num_target_layers"),
        mask_token_id=_first_int(views, "mask_token_id"),
        draft_vocab_size=positive(_first_int([config, layer_cfg], "draft_vocab_size")),
        vocab_size=positive(_first_int([config, layer_cfg], "vocab_size")),
    )


def analyze_speculative(view: ConfigView, drafters: object) -> Speculative:
    """The ``architecture.speculative`` section (``drafters``: the raw facts' list, as read); the
    drafter plan joins it once the serving sections are built."""
    layers, key = mtp_layer_count(view)
    described: list[Drafter] = []
    if isinstance(drafters, (list, tuple)):
        for entry in list(drafters)[:MAX_DRAFTERS]:
            info = describe_drafter(entry)
            if info is not None:
                described.append(info)
    return Speculative(mtp_layers=layers, mtp_source=key, drafters=described)
