"""What the scenario's Kueue release refuses in its Kueue objects (the objects' own checks are core/kube/kueue.py's
and core/kube/kueue_config.py's, which know no release): a Configuration API version the release does not serve,
a field it requires."""

from __future__ import annotations

from typing import Any

from ..kube.fields import FieldError
from ..kube.kueue import ADMISSION_CHECK_KIND, CONFIG_KIND
from ..kube.kueue_config import CONFIGURATION_KIND, check_release
from ..kube.versions import Profile

KUEUE_V1BETA2 = "kueue.x-k8s.io/v1beta2"  # served from Kueue 0.15 (apis/kueue/v1beta2)


def check_kueue_release(objects: list[dict[str, Any]], profile: Profile) -> None:
    """Raise FieldError (with the object's path) for what Kueue `profile.kueue` refuses."""
    for i, obj in enumerate(objects):
        if obj.get("kind") == CONFIGURATION_KIND:
            check_release(obj, f"spec.objects[{i}]", profile.kueue)
        elif obj.get("kind") in (ADMISSION_CHECK_KIND, CONFIG_KIND) and obj.get("apiVersion") == KUEUE_V1BETA2 \
                and int(profile.kueue.split(".")[1]) < 15:
            raise FieldError(f"spec.objects[{i}].apiVersion",
                             f"Kueue {profile.kueue} does not serve `{KUEUE_V1BETA2}` (from 0.15); "
                             "use `kueue.x-k8s.io/v1beta1`")
