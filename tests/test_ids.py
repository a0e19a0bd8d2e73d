"""Ids made without uuid.UUID objects: canonical version 4 UUIDs, and a result id that is the
same function of its call id as before (results already stored are found by it)."""

from __future__ import annotations

import uuid

import pytest

from proxy.records.calls import _RESULT_MASK, call_id_of, result_id_for
from infra.ids import new_hex, new_id


def test_new_ids_are_canonical_random_version_4_uuids() -> None:
    ids = [new_id() for _ in range(2000)]
    assert len(set(ids)) == len(ids)
    for i in ids[:200]:
        u = uuid.UUID(i)
        assert str(u) == i and u.version == 4 and u.variant == uuid.RFC_4122
    hexes = {new_hex() for _ in range(200)}
    assert len(hexes) == 200 and all(len(h) == 32 and int(h, 16) >= 0 for h in hexes)


@pytest.mark.parametrize("form", [str, lambda u: u.hex, lambda u: str(u).upper(),
                                  lambda u: "{" + str(u) + "}", lambda u: u.urn])
def test_a_result_id_is_the_masked_call_id_in_every_form_a_uuid_takes(form) -> None:  # type: ignore[no-untyped-def]
    for _ in range(50):
        u = uuid.uuid4()
        expected = str(uuid.UUID(int=u.int ^ _RESULT_MASK))
        assert result_id_for(form(u)) == expected
        assert call_id_of(expected) == str(u)


@pytest.mark.parametrize("bad", ["", "x" * 32, "1234", "g" + "0" * 31, "0" * 33])
def test_a_malformed_id_is_refused_as_before(bad: str) -> None:
    with pytest.raises(ValueError):
        result_id_for(bad)
