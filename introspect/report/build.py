"""The report's pages, in reading order: a model page per profile, a plan page per plan (and per
profile whose plan has layouts), a fleet page per matrix (a compare document, a fleet
document, or several profiles), with the health timelines attached to the fleet pages."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from introspect import __version__
from introspect.redact import scrub_document
from introspect.remote.contract import as_dict
from introspect.report.fleet_page import FleetPage, Matrix, fleet_page, matrix_of
from introspect.report.history import Health, from_health_document
from introspect.report.inputs import Loaded, compare_fleet, compare_profiles, history
from introspect.report.model_page import ModelPage, model_page
from introspect.report.plan_page import PlanPage, plan_page, read_plan

Page = ModelPage | PlanPage | FleetPage


@dataclass
class Report:
    title: str
    version: str
    sources: list[str]
    pages: list[Page]


def build_report(loaded: Sequence[Loaded]) -> Report:
    """The pages of the documents and history databases ``loaded`` (:func:`introspect.report.inputs.load`).

    Every document is masked first (:func:`introspect.redact.scrub_document`, the last guard of every
    file introspect writes): a profile saved by hand or an older version must not carry a token
    into a page that is pasted into tickets."""
    loaded = [dataclasses.replace(item, document=scrub_document(item.document)) if item.document is not None
              else item for item in loaded]
    healths = _healths(loaded)
    profiles = [item for item in loaded if item.kind == "profile"]
    models: list[Page] = []
    plans: list[Page] = []
    for n, item in enumerate(profiles, 1):
        document = as_dict(item.document)
        models.append(model_page(document, f"model-{n}", item.label))
        section = as_dict(document.get("plan"))
        if section.get("layouts"):
            plans.append(plan_page(read_plan(section, item.label), f"plan-{len(plans) + 1}", item.label))
    for item in (i for i in loaded if i.kind == "plan"):
        plans.append(plan_page(read_plan(as_dict(item.document), item.label), f"plan-{len(plans) + 1}", item.label))
    matrices = _matrices(loaded, profiles)
    fleets: list[Page] = []
    for n in range(max(len(matrices), len(healths))):
        label, matrix = matrices[n] if n < len(matrices) else (healths[n][0], None)
        health = healths[n][1] if n < len(healths) else None
        fleets.append(fleet_page(f"fleet-{n + 1}", label, matrix, health))
    pages = models + plans + fleets
    return Report(_title(pages), __version__, [item.label for item in loaded], pages)


def _healths(loaded: Sequence[Loaded]) -> list[tuple[str, Health]]:
    out = []
    for item in loaded:
        if item.kind == "health":
            out.append((item.label, from_health_document(as_dict(item.document), f"health run {item.label}")))
        elif item.kind == "history" and item.path is not None:
            out.append((item.label, history(item.path)))
    return out


def _matrices(loaded: Sequence[Loaded], profiles: list[Loaded]) -> list[tuple[str, Matrix]]:
    out = []
    for item in loaded:
        if item.kind == "compare":
            out.append((item.label, matrix_of(as_dict(item.document))))
        elif item.kind == "fleet":
            out.append((item.label, matrix_of(compare_fleet(item))))
    if len(profiles) > 1:  # several profiles: which of them differ is the fleet question
        out.append((f"{len(profiles)} profiles", matrix_of(compare_profiles(profiles))))
    return out


def _title(pages: list[Page]) -> str:
    if len(pages) == 1:
        return f"introspect report: {pages[0].title}"
    kinds = [page.kind for page in pages]
    counts = ", ".join(f"{kinds.count(kind)} {kind} page{'s' * (kinds.count(kind) > 1)}"
                       for kind in dict.fromkeys(kinds))
    return f"introspect report: {counts}"


__all__ = ["Page", "Report", "build_report"]
