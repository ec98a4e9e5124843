"""State snapshots: a ClusterState as bytes, so a restarted reader folds only the log's tail.

Why: an actor that Ray restarts loses its view; refolding the whole log each time grows with the run.
With a snapshot it decodes the state at offset N and folds N+1.. on. The contract (tests/test_snapshot_codec.py):
for any log, fold(prefix) -> encode -> decode -> fold(tail) encodes to the same bytes as fold(whole log),
and every reactor decides the same on it. A snapshot is only a cache of the log: whoever cannot read one
(SnapshotError) refolds from offset 0 and loses nothing.

Format: msgpack (msgspec), never pickle, since a snapshot is untrusted input like the log. One array:
`[MAGIC, FORMAT_VERSION, offset, shape, body]`. `shape` is a digest of the state's types (the JSON
schema of the body), so a snapshot written by a dralab whose ClusterState had other fields is refused
rather than decoded into defaults that the log would have filled in. The body stores every field of
ClusterState and its parts as they are, except:
- caches and monitors, rebuilt lazily or by whoever reads them: `touched_*` (the invariant monitor does a
  full check on a state it has not seen), `usage_changes` (the scheduler's feasibility cache starts
  afresh on another journal), `_view` (set by `apply` before any use) and `DraState._index`;
- the DRA model objects (device classes, slices, claims), stored as the manifests they were converted
  from and converted again on decode: the converters are pure and keep the manifest unchanged, so this
  gives equal objects (new `Device` identities, which only key caches) without encoding the model;
- AllocatedState's sets, stored sorted (set order is not reproducible), its Fractions as "n/d" strings.

Decoding checks the size first (a limit the caller passes), then the header, then the body's types
(msgspec), then the cross-references the fold indexes without looking (pods_by_phase, members, ...),
so a corrupt snapshot fails here with a SnapshotError (a ValueError) and not later inside the fold.
"""

from __future__ import annotations

import hashlib
import heapq
import typing
from dataclasses import fields
from fractions import Fraction
from typing import Any

import msgspec

from ..dra.allocated import AllocatedState
from ..dra.claims import convert_claim
from ..dra.convert import convert_device_class
from ..dra.model import DeviceID
from ..log.events import claim_key
from .cluster import ClusterState
from .device_taints import DeviceTaintState, RuleState
from .dra import ClaimState, DraState, convert_published_slice
from .objects import FAILED, PENDING, RUNNING, SUCCEEDED

MAGIC = "dralab-state"
FORMAT_VERSION = 1
DEFAULT_MAX_BYTES = 512 * 1024 * 1024
# Not state: rebuilt lazily by their readers (see the module docstring).
DROPPED = frozenset({"touched_nodes", "touched_pods", "touched_allocations", "usage_changes", "_view",
                     "node_changes"})
DRA_CUSTOM = frozenset({"classes", "slices", "claims", "allocated", "_index", "taint_rules", "slice_changes",
                        "allocation_changes"})
PHASES = (PENDING, RUNNING, SUCCEEDED, FAILED)

Dev = tuple[str, str, str]  # DeviceID as (driver, pool, device)


class SnapshotError(ValueError):
    """A snapshot that cannot be used (corrupt, too big, another format): refold the log instead."""


class SnapshotVersionError(SnapshotError):
    """Written by another snapshot format version or another shape of ClusterState."""


class SnapshotTooLarge(SnapshotError):
    """Over the size limit the caller set."""


class _Claim(msgspec.Struct, array_like=True):
    manifest: dict[str, Any]
    owner: str
    allocation: dict[str, Any] | None
    reserved_for: dict[str, None]


class _Rule(msgspec.Struct, array_like=True):  # a DeviceTaintRule (device_taints.RuleState); its caches are not kept
    manifest: dict[str, Any]
    time_added_ms: int
    condition: dict[str, Any] | None
    evicted: int
    status_ms: int
    evicted_ms: int


class _Allocated(msgspec.Struct, array_like=True):
    devices: list[Dev]  # sorted
    shared: list[tuple[Dev, str]]  # sorted
    capacity: list[tuple[Dev, dict[str, str]]]  # in dict order, each Fraction as "n/d"


def _body_type(cls: type, overrides: dict[str, Any], skip: frozenset[str], name: str) -> type[msgspec.Struct]:
    """A Struct with the fields of dataclass `cls` (their own types, less `skip`, some replaced): new
    fields of the state are stored without anyone touching this module (and change the shape digest)."""
    hints = typing.get_type_hints(cls)
    spec = [(f.name, overrides.get(f.name, hints[f.name])) for f in fields(cls) if f.name not in skip]
    return msgspec.defstruct(name, spec, array_like=True)


_DRA = _body_type(DraState, {"classes": dict[str, dict[str, Any]], "slices": dict[str, dict[str, Any]],
                             "claims": dict[str, _Claim], "allocated": _Allocated,
                             "taint_rules": tuple[dict[str, _Rule], dict[str, dict[str, int]]]},
                   frozenset({"_index", "slice_changes", "allocation_changes"}),
                   "_Dra")
_BODY = _body_type(ClusterState, {"dra": _DRA}, DROPPED, "_Body")


class _Head(msgspec.Struct, array_like=True):
    magic: str
    version: int


class _Snapshot(msgspec.Struct, array_like=True):
    magic: str
    version: int
    offset: int
    shape: str
    body: msgspec.Raw


def _strip(schema: Any) -> Any:
    """The schema without titles and descriptions (a docstring edit is no change of shape)."""
    if isinstance(schema, dict):
        return {k: _strip(v) for k, v in schema.items() if k not in ("title", "description")}
    if isinstance(schema, list):
        return [_strip(v) for v in schema]
    return schema


SHAPE = hashlib.blake2b(msgspec.json.encode(_strip(msgspec.json.schema(_BODY))), digest_size=8).hexdigest()
_encoder = msgspec.msgpack.Encoder()
_head_decoder = msgspec.msgpack.Decoder(_Head)
_snapshot_decoder = msgspec.msgpack.Decoder(_Snapshot)
_body_decoder = msgspec.msgpack.Decoder(_BODY)


# ---------------------------------------------------------------------------------------------- encode


def _dev(d: DeviceID) -> Dev:
    return (d.driver, d.pool, d.device)


def _encode_dra(dra: DraState) -> msgspec.Struct:
    a = dra.allocated
    allocated = _Allocated(
        sorted(_dev(d) for d in a.devices),
        sorted((_dev(d), share) for d, share in a.shared),
        [(_dev(d), {k: f"{v.numerator}/{v.denominator}" for k, v in caps.items()}) for d, caps in a.capacity.items()],
    )
    custom = {
        "classes": {name: c.manifest for name, c in dra.classes.items()},
        "slices": {name: s.manifest for name, s in dra.slices.items()},
        "claims": {k: _Claim(c.claim.manifest, c.owner, c.allocation, c.reserved_for) for k, c in dra.claims.items()},
        "allocated": allocated,
        "taint_rules": ({n: _Rule(r.manifest, r.time_added_ms, r.condition, r.evicted, r.status_ms,
                                 r.evicted_ms)
                         for n, r in dra.taint_rules.rules.items()}, dra.taint_rules.no_execute_since),
    }
    plain = {f.name: getattr(dra, f.name) for f in fields(DraState) if f.name not in DRA_CUSTOM}
    return _DRA(**plain, **custom)


def encode_state(state: ClusterState, *, max_bytes: int | None = None) -> bytes:
    """The snapshot of `state` (deterministic: equal states give equal bytes). `max_bytes`: refuse to
    write what a reader with that limit would refuse to read."""
    values = {f.name: getattr(state, f.name) for f in fields(ClusterState) if f.name not in DROPPED}
    values["dra"] = _encode_dra(state.dra)
    body = _encoder.encode(_BODY(**values))
    data = _encoder.encode(_Snapshot(MAGIC, FORMAT_VERSION, state.offset, SHAPE, msgspec.Raw(body)))
    if max_bytes is not None and len(data) > max_bytes:
        raise SnapshotTooLarge(f"snapshot: {len(data)} bytes at offset {state.offset}, over the limit of {max_bytes}")
    return data


# ---------------------------------------------------------------------------------------------- decode


def read_header(data: bytes, *, max_bytes: int = DEFAULT_MAX_BYTES) -> int:
    """The log offset a snapshot was taken at (checking size, magic, version and shape, not the body):
    where to resume reading the log."""
    return _header(data, max_bytes).offset


def _header(data: bytes, max_bytes: int) -> _Snapshot:
    if len(data) > max_bytes:
        raise SnapshotTooLarge(f"snapshot: {len(data)} bytes, over the limit of {max_bytes}")
    try:
        head = _head_decoder.decode(data)
    except (msgspec.DecodeError, RecursionError) as exc:
        raise SnapshotError(f"snapshot: not a dralab state snapshot or truncated ({exc})") from None
    if head.magic != MAGIC:
        raise SnapshotError(f"snapshot: not a dralab state snapshot (magic {head.magic[:40]!r})")
    if head.version != FORMAT_VERSION:
        raise SnapshotVersionError(f"snapshot: format version {head.version}; this dralab reads only version "
                                   f"{FORMAT_VERSION} (refold the log)")
    try:
        snap = _snapshot_decoder.decode(data)
    except (msgspec.DecodeError, RecursionError) as exc:
        raise SnapshotError(f"snapshot: corrupt or truncated header ({exc})") from None
    if snap.shape != SHAPE:
        raise SnapshotVersionError(f"snapshot: state shape {snap.shape[:40]!r} differs from this dralab's {SHAPE} "
                                   "(written by another version; refold the log)")
    return snap


def decode_state(data: bytes, *, max_bytes: int = DEFAULT_MAX_BYTES) -> ClusterState:
    """The ClusterState of a snapshot; SnapshotError (a ValueError) saying what is wrong otherwise."""
    snap = _header(data, max_bytes)
    # Decoding makes ~10 objects per pod, none garbage: a caller that decodes large snapshots may pause the
    # collector around this call (a process-wide switch, the caller's to flip, never pure code's).
    try:
        body = _body_decoder.decode(snap.body)
        state = _build(body)
        _check(state)
    except SnapshotError:
        raise
    except (msgspec.DecodeError, RecursionError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise SnapshotError(f"snapshot at offset {snap.offset}: corrupt body: {exc}") from None
    if state.offset != snap.offset:
        raise SnapshotError(f"snapshot: header says offset {snap.offset}, body {state.offset}")
    return state


def _build(body: msgspec.Struct) -> ClusterState:
    values = {name: getattr(body, name) for name in body.__struct_fields__}
    values["dra"] = _decode_dra(values["dra"])
    state = ClusterState(**values)
    heapq.heapify(state.run_deadlines)  # a no-op on the heap as written; a forged one is made a heap again
    return state


def _decode_dra(body: Any) -> DraState:
    plain = {name: getattr(body, name) for name in body.__struct_fields__ if name not in DRA_CUSTOM}
    dra = DraState(**plain)
    for name, manifest in body.classes.items():
        dra.classes[name] = _same(convert_device_class(manifest, ""), name, "device class")
    for name, manifest in body.slices.items():
        dra.slices[name] = _same(convert_published_slice(manifest, ""), name, "slice")
    for key, c in body.claims.items():
        claim = convert_claim(c.manifest, "")
        _same(claim, key, "claim", claim_key(claim.namespace, claim.name))
        dra.claims[key] = ClaimState(claim, c.owner, c.allocation, c.reserved_for)
    rules, since = body.taint_rules
    dra.taint_rules = DeviceTaintState({n: RuleState(r.manifest, r.time_added_ms, r.condition, r.evicted, r.status_ms,
                                                  r.evicted_ms)
                                        for n, r in rules.items()}, since)
    a = body.allocated
    dra.allocated = AllocatedState(
        {DeviceID(*d) for d in a.devices},
        {(DeviceID(*d), share) for d, share in a.shared},
        {DeviceID(*d): {k: Fraction(v) for k, v in caps.items()} for d, caps in a.capacity},
    )
    return dra


T = typing.TypeVar("T")


def _same(obj: T, key: str, what: str, name: str | None = None) -> T:
    """A model object converted again must sit under the key it was stored under."""
    actual = name if name is not None else getattr(obj, "name", None)
    if actual != key:
        raise SnapshotError(f"snapshot: {what} {key!r} holds a manifest of {actual!r}")
    return obj


def _check(state: ClusterState) -> None:
    """The cross-references the fold follows without checking (it would raise KeyError mid-fold)."""
    pods, nodes = state.pods, state.nodes
    if tuple(state.pods_by_phase) != PHASES:
        raise SnapshotError(f"snapshot: pods_by_phase has phases {list(state.pods_by_phase)}")
    for phase, keys in state.pods_by_phase.items():
        for key in keys:
            if key not in pods or pods[key].phase != phase:
                raise SnapshotError(f"snapshot: pods_by_phase[{phase}] lists {key!r}, not a {phase} pod")
    if sum(map(len, state.pods_by_phase.values())) != len(pods):
        raise SnapshotError("snapshot: pods_by_phase does not list every pod once")
    for node in nodes.values():
        if any(key not in pods for key in node.pods):
            raise SnapshotError(f"snapshot: node {node.name} lists unknown pods")
    for group, members in state.nodes_by_group.items():
        if any(name not in nodes for name in members):
            raise SnapshotError(f"snapshot: node group {group} lists unknown nodes")
    gang = state.gang
    if any(key not in pods for key in gang.reservations):
        raise SnapshotError("snapshot: a gang reservation of an unknown pod")
    if any(key not in gang.refs for members in gang.members.values() for key in members):
        raise SnapshotError("snapshot: a gang member without its gang reference")
    for name in state.never_ready:
        if name not in nodes:
            raise SnapshotError(f"snapshot: never_ready lists unknown node {name}")
