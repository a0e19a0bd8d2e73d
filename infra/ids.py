"""Ids made on every call: random (version 4) UUIDs as text, built from os.urandom without a
uuid.UUID object (several per call; the object and its str() cost more than the randomness)."""

from __future__ import annotations

import os


def new_id() -> str:
    """A random version 4 UUID, in its canonical lowercase text form."""
    b = bytearray(os.urandom(16))
    b[6] = (b[6] & 0x0F) | 0x40  # version 4
    b[8] = (b[8] & 0x3F) | 0x80  # RFC 4122 variant
    return dashed(b.hex())


def new_hex() -> str:
    """128 random bits as 32 hex digits (a request id)."""
    return os.urandom(16).hex()


def dashed(h: str) -> str:
    """32 hex digits in the 8-4-4-4-12 form of a UUID."""
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
