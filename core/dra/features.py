"""The DRA allocator's optional features from a release profile's feature gates.

Upstream the scheduler builds the structured allocator's `Features` from its feature gates
(pkg/scheduler/framework/plugins/dynamicresources, `structured.Features`), and since autoscaler PR #10200 a
cluster-autoscaler built against a release derives them the same way: both read the gates here, so the
scheduler and the autoscaler's simulation of a new node never disagree about what a device can do.
Here and not in kube/versions.py because kube/ may not import dra/.
"""

from __future__ import annotations

from ..kube.versions import Profile
from .prepare import Features

# feature gate -> field of Features (one gate each; binding conditions need a second gate, below)
GATE_FEATURES: dict[str, str] = {
    "DRAAdminAccess": "admin_access",
    "DRAPrioritizedList": "prioritized_list",
    "DRAPartitionableDevices": "partitionable_devices",
    "DRADeviceTaints": "device_taints",
    "DRADeviceBindingConditions": "binding_conditions",
    "DRAConsumableCapacity": "consumable_capacity",
}


def allocator_features(profile: Profile) -> Features:
    """The allocator's features under `profile`. Binding conditions need DRAResourceClaimDeviceStatus as
    well (the allocator reports them through the claim's device status, KEP-5007). Also the allocator's upstream
    bugs of that release (core/kube/bugs.py)."""
    on = {field: profile.enabled(gate) for gate, field in GATE_FEATURES.items()}
    on["binding_conditions"] = on["binding_conditions"] and profile.enabled("DRAResourceClaimDeviceStatus")
    # kubernetes#139034: the release's allocator (the scheduler's, and cluster-autoscaler's, which vendors it)
    # forgets the counters of committed shares
    on["shared_counters"] = not profile.bug("kubernetes#139034")
    return Features(**on)
