"""The report's pages, in reading order: a model page per profile, a plan page per plan (and per
profile whose plan has layouts), a fleet page per matrix (a compare document, a fleet
document, or several profiles), with the health timelines attached to the fleet pages."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from introspect import __version__
from introspect.documents.compare import CompareDocument
from introspect.documents.health import HealthDocument
from introspect.documents.listing import FleetProfilesDocument
from introspect.documents.profile import ProfileDocument
from introspect.documents.profile_serving import Plan
from introspect.report.fleet_page import FleetPage, Matrix, fleet_page, matrix_of
from introspect.report.history import Health, from_health_document
from introspect.report.inputs import Loaded, compare_fleet, compare_profiles, history
from introspect.report.model_page import ModelPage, model_page
from introspect.report.plan_page import PlanPage, plan_page

Page = ModelPage | PlanPage | FleetPage


@dataclass
class Report:
    title: str
    version: str
    sources: list[str]
    pages: list[Page]


def build_report(loaded: Sequence[Loaded]) -> Report:
    """The pages of the documents and history databases ``loaded`` (:func:`introspect.report.inputs.load`:
    typed, and masked there)."""
    healths = _healths(loaded)
    profiles = [(item.label, item.path, item.document) for item in loaded
                if isinstance(item.document, ProfileDocument)]
    models: list[Page] = []
    plans: list[Page] = []
    for n, (label, _, profile) in enumerate(profiles, 1):
        models.append(model_page(profile, f"model-{n}", label))
        if profile.plan.layouts:
            plans.append(plan_page(profile.plan, f"plan-{len(plans) + 1}", label))
    for item in loaded:
        if isinstance(item.document, Plan):
            plans.append(plan_page(item.document, f"plan-{len(plans) + 1}", item.label))
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
        if isinstance(item.document, HealthDocument):
            out.append((item.label, from_health_document(item.document, f"health run {item.label}")))
        elif item.kind == "history" and item.path is not None:
            out.append((item.label, history(item.path)))
    return out


def _matrices(loaded: Sequence[Loaded], profiles: list[tuple[str, str | None, ProfileDocument]]
              ) -> list[tuple[str, Matrix]]:
    out = []
    for item in loaded:
        if isinstance(item.document, CompareDocument):
            out.append((item.label, matrix_of(item.document)))
        elif isinstance(item.document, FleetProfilesDocument):
            out.append((item.label, matrix_of(compare_fleet(item.document, item.path))))
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
