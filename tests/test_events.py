"""The event schema: stable encoding, and clear errors for bad entries."""

import msgspec
import pytest

from dralab.core.log.events import (
    SCHEMA_VERSION,
    LogDecodeError,
    NodeReady,
    PodBound,
    PodCreated,
    Record,
    decode_record,
    encode_record,
)


def _record() -> Record:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a", "namespace": "default"}}
    return Record(id="x", source="scheduler", view=3, t=1500,
                  events=(PodCreated(pod=pod), PodBound(pod="pod/default/a", node="n1"), NodeReady(name="n1")))


def test_round_trip_is_exact() -> None:
    rec = _record()
    payload = encode_record(rec)
    assert decode_record(payload, 7) == rec
    assert encode_record(decode_record(payload, 7)) == payload


def test_writes_are_deduplicated_in_order() -> None:
    assert _record().writes() == ("pod/default/a", "node/n1")


def test_garbage_names_the_offset() -> None:
    with pytest.raises(LogDecodeError, match="offset 42: malformed payload"):
        decode_record(b"\xc1\xc1", 42)


def test_unknown_event_type_names_the_offset() -> None:
    raw = msgspec.msgpack.encode({"id": "x", "source": "s", "view": 0, "t": 0, "events": [{"type": "Nope"}]})
    with pytest.raises(LogDecodeError, match=r"offset 9: invalid record: .*Nope"):
        decode_record(raw, 9)


def test_wrong_field_type_names_the_offset() -> None:
    raw = msgspec.msgpack.encode(
        {"id": "x", "source": "s", "view": "zero", "t": 0, "events": []})
    with pytest.raises(LogDecodeError, match=r"offset 3: invalid record: Expected `int`, got `str` - at `\$.view`"):
        decode_record(raw, 3)


def test_newer_schema_is_refused_clearly() -> None:
    raw = msgspec.msgpack.encode({"id": "x", "source": "s", "view": 0, "t": 0, "events": [], "v": SCHEMA_VERSION + 1})
    with pytest.raises(LogDecodeError, match="newer than this dralab"):
        decode_record(raw, 5)
