"""Journal records Postgres refused again and again, kept whole in a JetStream stream of their
own (TOOLPROXY_DEAD_LETTERS) until an operator lists and replays them (`toolproxy journal
dead-letters list|replay`, or the admin routes under /v1/admin/journal).

Why JetStream and not a table: what refused the record is Postgres. A dead letter is stored
before the journal lets the record go (the writer terminates it only once the dead letter is
acknowledged), so a record is never only in a log line. A replay publishes it again to the
journal, under its own subject, and removes the dead letter once the journal has it: the
writer takes it as any other record (primary keys make a second copy harmless)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from nats.js import JetStreamContext
from nats.js.api import RetentionPolicy, StorageType, StreamConfig
from nats.js.errors import NotFoundError

from infra.jetstream import raise_replicas
from proxy.records.entry import SUBJECT_PREFIX

STREAM = "TOOLPROXY_DEAD_LETTERS"
PREFIX = "toolproxy.deadletter"
KEEP_DAYS = 30
MAX_LIST = 1000

# Headers of a dead letter: where the record came from, and why it was set aside.
H_SUBJECT = "Toolproxy-Journal-Subject"
H_SEQ = "Toolproxy-Journal-Seq"
H_ERROR = "Toolproxy-Error"
H_REFUSALS = "Toolproxy-Refusals"


def stream_config(replicas: int = 1) -> StreamConfig:
    return StreamConfig(
        name=STREAM,
        subjects=[f"{PREFIX}.>"],
        retention=RetentionPolicy.LIMITS,  # kept until replayed (or KEEP_DAYS)
        storage=StorageType.FILE,
        max_age=KEEP_DAYS * 24 * 3600,
        duplicate_window=120,
        num_replicas=replicas,
    )


@dataclass(frozen=True)
class DeadLetter:
    sequence: int  # in TOOLPROXY_DEAD_LETTERS: what a replay names
    subject: str  # the journal subject it came from
    journal_sequence: int
    error: str
    refusals: int
    time: datetime | None
    data: bytes

    def view(self, *, full: bool = False) -> dict[str, Any]:
        text = self.data.decode(errors="replace")
        return {"sequence": self.sequence, "subject": self.subject,
                "journal_sequence": self.journal_sequence, "error": self.error,
                "refusals": self.refusals,
                "time": self.time.isoformat() if self.time else None,
                "size": len(self.data), "entry": text if full else text[:2_000]}


class DeadLetters:
    def __init__(self, js: JetStreamContext, *, replicas: int = 1, timeout_s: float = 2.0) -> None:
        self._js = js
        self._replicas = replicas
        self._timeout_s = timeout_s

    async def ensure(self) -> None:
        try:
            info = await self._js.stream_info(STREAM)
        except NotFoundError:
            await self._js.add_stream(stream_config(self._replicas))
            return
        await raise_replicas(self._js, STREAM, self._replicas, info=info)

    async def keep(self, subject: str, journal_seq: int, data: bytes, *, error: str,
                   refusals: int) -> None:
        """Stored (acknowledged by the stream) or raises: the caller lets the record go only
        after this returns."""
        headers = {H_SUBJECT: subject, H_SEQ: str(journal_seq), H_ERROR: _one_line(error),
                   H_REFUSALS: str(refusals), "Nats-Msg-Id": f"dead:{journal_seq}"}
        try:
            await self._js.publish(f"{PREFIX}.{journal_seq}", data, headers=headers,
                                   timeout=self._timeout_s)
        except NotFoundError:
            await self.ensure()
            await self._js.publish(f"{PREFIX}.{journal_seq}", data, headers=headers,
                                   timeout=self._timeout_s)

    async def list(self, limit: int = 100, after: int = 0) -> list[DeadLetter]:
        """The oldest first, from sequence `after` + 1, at most `limit`."""
        found: list[DeadLetter] = []
        seq = after + 1
        while len(found) < min(limit, MAX_LIST):
            try:
                msg = await self._js.get_msg(STREAM, seq=seq, subject=f"{PREFIX}.>", next=True)
            except NotFoundError:
                break  # no message at or after seq (or no stream: nothing was ever set aside)
            found.append(_letter(msg))
            seq = int(msg.seq or seq) + 1
        return found

    async def replay(self, sequences: list[int]) -> list[int]:
        """Each named dead letter back into the journal, then removed: the sequences replayed
        (one no longer there is skipped)."""
        done: list[int] = []
        for seq in sequences:
            try:
                msg = await self._js.get_msg(STREAM, seq=seq)
            except NotFoundError:
                continue
            letter = _letter(msg)
            if not letter.subject.startswith(f"{SUBJECT_PREFIX}."):
                continue  # not ours to publish anywhere else
            # A fresh message id: the journal's dedupe window must not take it for the copy
            # it refused; a replay interrupted after the publish may land twice (harmless).
            await self._js.publish(letter.subject, letter.data, timeout=self._timeout_s,
                                   headers={"Nats-Msg-Id": f"replay:{seq}:{letter.journal_sequence}"})
            await self._js.delete_msg(STREAM, seq)
            done.append(seq)
            await asyncio.sleep(0)
        return done

    async def count(self) -> int:
        try:
            info = await self._js.stream_info(STREAM)
        except NotFoundError:
            return 0
        return int(info.state.messages or 0)


def _one_line(text: str) -> str:
    return " ".join(text.split())[:1_000] or "refused"


def _letter(msg: Any) -> DeadLetter:
    headers = msg.headers or {}
    when = getattr(msg, "time", None)
    if isinstance(when, str):
        try:
            when = datetime.fromisoformat(when.replace("Z", "+00:00"))
        except ValueError:
            when = None
    if isinstance(when, datetime) and when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return DeadLetter(
        sequence=int(msg.seq or 0), subject=headers.get(H_SUBJECT, ""),
        journal_sequence=int(headers.get(H_SEQ, "0") or 0), error=headers.get(H_ERROR, ""),
        refusals=int(headers.get(H_REFUSALS, "0") or 0), time=when, data=msg.data or b"")
