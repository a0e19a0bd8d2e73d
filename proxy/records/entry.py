"""A journal entry: what one request left behind (usage, its call's row, decisions, events),
the subject it travels on, and its JSON form."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson
from pydantic import TypeAdapter

from pdp.decision_log import DecisionRecord
from proxy.records.calls import CallRecord
from proxy.records.events import EventRecord
from proxy.records.usage import UsageRecord

STREAM = "TOOLPROXY_JOURNAL"  # the JetStream stream entries are stored in
SUBJECT_PREFIX = "toolproxy.journal"


@dataclass(kw_only=True)
class Entry:
    """One journal message: what a request left behind — a call's usage record, its row, the
    decisions taken and the events emitted (any of them). The proxy builds it from values it
    made or checked itself and writes it with `dumps` (orjson, several times cheaper than a
    pydantic model's construction and dump); whatever reads one back validates it
    (`load_entry`)."""

    usage: UsageRecord | None = None
    call: CallRecord | None = None
    decisions: list[DecisionRecord] = field(default_factory=list)
    events: list[EventRecord] = field(default_factory=list)
    key: str  # deduplication id

    @property
    def subject(self) -> str:
        call_id = self.call.call_id if self.call is not None else (
            self.usage.call_id if self.usage is not None else None)
        return call_subject(call_id) if call_id is not None else MISC_SUBJECT


_ENTRY: TypeAdapter[Entry] = TypeAdapter(Entry)
USAGE_FIRST = b'{"usage":{'  # how an entry with a usage record begins (see JournalWriter)
MISC_SUBJECT = f"{SUBJECT_PREFIX}.misc"  # entries of no call (decisions of a listing)


def call_subject(call_id: str) -> str:
    return f"{SUBJECT_PREFIX}.call.{call_id}"


def dumps(entry: Entry) -> bytes:
    """An entry as the stream carries it: JSON, its fields in declaration order (`usage`
    first), times in RFC 3339 with a Z."""
    return orjson.dumps(entry, option=orjson.OPT_UTC_Z)


def load_entry(data: bytes | str) -> Entry:
    """An entry read back from the stream, validated (ValidationError if it is none)."""
    return _ENTRY.validate_json(data)


def entry_doc(entry: Entry) -> dict[str, Any]:
    """An entry in its JSON form, as the writer reads it from the stream."""
    doc: dict[str, Any] = orjson.loads(dumps(entry))
    return doc


