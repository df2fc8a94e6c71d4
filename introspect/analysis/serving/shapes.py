"""Intermediate shapes passed between the modules of analysis/serving/ and to the profile builder.

The sections themselves are the document models (documents/profile_serving.py); these only
bundle them on their way into the profile.
"""

from __future__ import annotations

from typing import TypedDict

from introspect.documents.profile_serving import Engines, Gpus, Plan


class ServingSections(TypedDict):
    """The profile's serving sections, as ``serving_sections`` builds them (analysis/profile.py reads them)."""

    engines: Engines
    gpus: Gpus
    plan: Plan
