"""What the scenario's Kueue release refuses in its Kueue objects (the objects' own checks are core/kube/kueue.py's
and core/kube/kueue_config.py's, which know no release): a Configuration API version the release does not serve,
a field it requires."""

from __future__ import annotations

from typing import Any

from ..kube.kueue_config import CONFIGURATION_KIND, check_release
from ..kube.versions import Profile


def check_kueue_release(objects: list[dict[str, Any]], profile: Profile) -> None:
    """Raise FieldError (with the object's path) for what Kueue `profile.kueue` refuses."""
    for i, obj in enumerate(objects):
        if obj.get("kind") == CONFIGURATION_KIND:
            check_release(obj, f"spec.objects[{i}]", profile.kueue)
