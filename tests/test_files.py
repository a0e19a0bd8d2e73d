"""file.list / file.read / file.write / file.delete: paths, limits, media types, digests,
excerpts with artifacts, all-or-nothing writes, team isolation — through the pipeline, and
the limits against the real Postgres with small settings."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import time
import uuid
from typing import Any

import asyncpg
import pytest

from services.files import service as files
from services.files import store
from services.files.config import FileSettings
from services.files.paths import normalize, normalize_prefix
from services.sdk import ToolError
from services.sdk.service import CallContext, ToolResult
from tests.support.calls import bearer, invoke
from tests.support.data_helpers import BOUNDARY, assert_bad_input, grant_tools, ok, tool_failure
from tests.support.tool_harness import run_tool

ALL = ("file.list", "file.read", "file.write", "file.delete")


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# --- paths ----------------------------------------------------------------------------------


@pytest.mark.parametrize("raw, normal", [
    ("notes.txt", "notes.txt"),
    ("docs/a/b.md", "docs/a/b.md"),
    ("docs//a/./b.md", "docs/a/b.md"),
    ("./docs/b.md", "docs/b.md"),
    ("Cafe\u0301.txt", "Café.txt"),  # NFC: one form for one name
    ("a..b/c", "a..b/c"),
])
def test_paths_are_normalized(raw: str, normal: str) -> None:
    assert normalize(raw) == normal


@pytest.mark.parametrize("raw", [
    "", "/etc/passwd", "../secret", "a/../../b", "a/..", "a\\b", "a\x00b", "a\nb", "a\x7f",
    "a/", ".", "./", "a/\u202eexe.txt", "zero\u200bwidth", " lead/x", "x/trail ",
    "/".join(["d"] * 17), "x" * 256, "/".join(["y" * 200] * 6),
])
def test_bad_paths_are_refused(raw: str) -> None:
    with pytest.raises(ToolError) as exc:
        normalize(raw)
    assert exc.value.code == "invalid_path"


def test_prefixes_keep_a_folder_slash() -> None:
    assert normalize_prefix("") == ""
    assert normalize_prefix("docs/") == "docs/"
    assert normalize_prefix("docs") == "docs"
    assert normalize_prefix(".//docs/./") == "docs/"
    with pytest.raises(ToolError):
        normalize_prefix("../")


# --- through the pipeline -------------------------------------------------------------------


async def test_write_read_list_delete(client, token, team) -> None:
    await grant_tools(client, token, team, *ALL)
    tok = token(team=team)
    w = await ok(client, tok, "file.write", {"path": "docs//plan.md", "content": "# Plan\nship",
                                             "tags": ["plan", "q4"]})
    data = b"# Plan\nship"
    assert w["output"] == {"path": "docs/plan.md", "size": len(data), "sha256": sha(data),
                           "media_type": "text/markdown", "created": True}
    assert w["object_refs"] == [{"type": "file", "id": "docs/plan.md"}]
    png = bytes(range(256))
    await ok(client, tok, "file.write", {"path": "img/logo.png",
                                         "content_base64": base64.b64encode(png).decode()})
    await ok(client, tok, "file.write", {"path": "notes", "content": "plain"})

    r = (await ok(client, tok, "file.read", {"path": "docs/plan.md"}))["output"]
    assert (r["content"], r["encoding"], r["truncated"], r["sha256"]) == (
        "# Plan\nship", "utf-8", False, sha(data))
    assert r["tags"] == ["plan", "q4"] and "excerpt" not in r
    b = (await ok(client, tok, "file.read", {"path": "img/logo.png"}))["output"]
    assert (b["media_type"], b["encoding"], base64.b64decode(b["content"])) == (
        "image/png", "base64", png)
    n = (await ok(client, tok, "file.read", {"path": "notes"}))["output"]
    assert (n["media_type"], n["content"]) == ("text/plain", "plain")

    listed = (await ok(client, tok, "file.list"))["output"]
    assert [f["path"] for f in listed["files"]] == ["docs/plan.md", "img/logo.png", "notes"]
    assert listed["files"][0] == {"path": "docs/plan.md", "size": len(data), "sha256": sha(data),
                                  "media_type": "text/markdown", "tags": ["plan", "q4"],
                                  "updated_at": listed["files"][0]["updated_at"]}
    assert [f["path"] for f in (await ok(client, tok, "file.list", {"prefix": "docs/"}))
            ["output"]["files"]] == ["docs/plan.md"]
    assert (await ok(client, tok, "file.list", {"prefix": "do"}))["output"]["count"] == 1
    page = (await ok(client, tok, "file.list", {"limit": 2}))["output"]
    assert (page["count"], page["truncated"], page["next_after"]) == (2, True, "img/logo.png")
    rest = (await ok(client, tok, "file.list", {"after": page["next_after"]}))["output"]
    assert [f["path"] for f in rest["files"]] == ["notes"] and rest["truncated"] is False

    again = await ok(client, tok, "file.write", {"path": "docs/plan.md", "content": "v2"})
    assert (again["output"]["created"], again["output"]["size"]) == (False, 2)
    d = await ok(client, tok, "file.delete", {"path": "./docs/plan.md"})
    assert d["output"] == {"path": "docs/plan.md", "deleted": True}
    await tool_failure(client, tok, "file.read", {"path": "docs/plan.md"}, 404, "not_found")
    await tool_failure(client, tok, "file.delete", {"path": "docs/plan.md"}, 404, "not_found")


async def test_a_large_file_reads_as_an_excerpt_and_an_artifact(client, token, team) -> None:
    await grant_tools(client, token, team, "file.write", "file.read")
    tok = token(team=team)
    text = "é" + "0123456789" * 20_000  # 200,002 bytes of UTF-8
    await ok(client, tok, "file.write", {"path": "big.txt", "content": text})
    body = await ok(client, tok, "file.read", {"path": "big.txt"})
    out = body["output"]
    assert (out["size"], out["truncated"], out["encoding"]) == (len(text.encode()), True, "utf-8")
    assert "content" not in out and text.startswith(out["excerpt"])
    assert len(out["excerpt"].encode()) <= FileSettings().excerpt_bytes
    (artifact,) = body["artifacts"]
    assert artifact["artifact_id"] == out["artifact_id"] and artifact["kind"] == "file"
    assert (artifact["bytes"], artifact["sha256"], artifact["path"]) == (
        out["size"], sha(text.encode()), "big.txt")
    r = await client.get(artifact["href"], headers=bearer(tok))
    assert r.status == 200 and (await r.read()).decode() == text
    assert r.headers["Content-Type"].startswith("text/plain")
    # The artifact belongs to the team; the call record names it.
    r = await client.get(artifact["href"], headers=bearer(token(team="someone-else")))
    assert r.status == 404
    for _ in range(200):  # the call's record follows the response through the journal
        r = await client.get(f"/v1/calls/{body['call_id']}", headers=bearer(tok))
        record = await r.json()
        if r.status == 200 and record["status"] == "COMPLETED":
            break
        await asyncio.sleep(0.05)
    assert [a["artifact_id"] for a in record["artifacts"]] == [artifact["artifact_id"]]


async def test_a_confidential_read_keeps_no_artifact(client, token, team, db_pool) -> None:
    await grant_tools(client, token, team, "file.write", "file.read")
    tok = token(team=team)
    await ok(client, tok, "file.write", {"path": "big.bin",
                                         "content_base64": base64.b64encode(b"\x01" * 100_000).decode()})
    body = await ok(client, tok, "file.read", {"path": "big.bin"}, context={"confidential": True})
    assert "artifacts" not in body and "artifact_id" not in body["output"]
    assert body["output"]["encoding"] == "base64" and body["output"]["truncated"] is True
    n = await db_pool.fetchval("SELECT count(*) FROM artifacts WHERE team_id = $1", team)
    assert n == 0


async def test_another_teams_files_are_not_found(client, token, team) -> None:
    await grant_tools(client, token, team, "file.write")
    await ok(client, token(team=team), "file.write", {"path": "secret.txt", "content": "mine"})
    other = f"t_{uuid.uuid4().hex[:10]}"
    await grant_tools(client, token, other, *ALL)
    tok = token(team=other)
    assert (await ok(client, tok, "file.list"))["output"]["files"] == []
    await tool_failure(client, tok, "file.read", {"path": "secret.txt"}, 404, "not_found")
    await tool_failure(client, tok, "file.delete", {"path": "secret.txt"}, 404, "not_found")
    # Writing the same path in another team is another file.
    created = await ok(client, tok, "file.write", {"path": "secret.txt", "content": "theirs"})
    assert created["output"]["created"] is True


@pytest.mark.parametrize("args, where", [
    ({"path": "../escape", "content": "x"}, "$.path"),
    ({"path": "/abs", "content": "x"}, "$.path"),
    ({"path": "a\\b", "content": "x"}, "$.path"),
    ({"path": "a\u0000b", "content": "x"}, BOUNDARY),
    ({"path": "a\nb", "content": "x"}, "$.path"),
    ({"path": "ok", "content": "x\u0000"}, BOUNDARY),
    ({"path": "ok"}, "$"),
    ({"path": "ok", "content": "x", "content_base64": "eA=="}, "$"),
    ({"path": "ok", "content_base64": "not base64!"}, "$.content_base64"),
    ({"path": "ok", "content": "x", "media_type": "text/html; charset=utf-8"}, "$.media_type"),
    ({"path": "ok", "content": "x", "tags": ["a", "a"]}, "$.tags"),
    ({"path": "x" * 1025, "content": "x"}, "$.path"),
])
async def test_bad_write_args_are_refused_by_the_proxy(client, token, team, db_pool,
                                                       args, where) -> None:
    await grant_tools(client, token, team, "file.write")
    status, body = await invoke(client, token(team=team), "file.write", args)
    assert_bad_input(status, body, where)
    assert await db_pool.fetchval("SELECT count(*) FROM files WHERE team_id = $1", team) == 0


@pytest.mark.parametrize("path", ["a/\u202eexe.txt", "/".join(["d"] * 17), "x" * 256])
async def test_paths_the_service_refuses_are_400_too(client, token, team, db_pool, path) -> None:
    await grant_tools(client, token, team, "file.write")
    await tool_failure(client, token(team=team), "file.write", {"path": path, "content": "x"},
                       400, "invalid_path")
    assert await db_pool.fetchval("SELECT count(*) FROM files WHERE team_id = $1", team) == 0


async def test_bad_base64_padding_is_invalid_content(client, token, team, db_pool) -> None:
    await grant_tools(client, token, team, "file.write")
    await tool_failure(client, token(team=team), "file.write",
                       {"path": "x", "content_base64": "abc"}, 400, "invalid_content")
    assert await db_pool.fetchval("SELECT count(*) FROM files WHERE team_id = $1", team) == 0


async def test_file_tools_need_their_own_grants(client, token, team) -> None:
    await grant_tools(client, token, team, "file.read", "file.list")
    tok = token(team=team)
    for tool, args in (("file.write", {"path": "x", "content": "x"}), ("file.delete", {"path": "x"})):
        status, body = await invoke(client, tok, tool, args)
        assert (status, body["error"]["reasons"]) == (403, ["grant_required"]), tool


# --- limits, against Postgres with small settings ---------------------------------------------


SMALL = FileSettings(max_bytes=100, team_max_bytes=250, team_max_files=3, inline_bytes=40,
                     excerpt_bytes=16)


def ctx(team: str, **more: Any) -> CallContext:
    return CallContext(call_id=str(uuid.uuid4()), decision_id="d", team_id=team, agent_id="a",
                       run_id=None, deadline=time.time() + 10, **more)


async def reply(pool: asyncpg.Pool, team: str, tool_id: str, args: dict[str, Any],
                settings: FileSettings = SMALL) -> dict[str, Any]:
    (tool,) = [t for t in files.service(pool, settings).tools if t.manifest.tool_id == tool_id]
    return await run_tool(tool, args, ctx(team))


async def usage(pool: asyncpg.Pool, team: str) -> tuple[int, int] | None:
    row = await pool.fetchrow("SELECT files, bytes FROM file_usage WHERE team_id = $1", team)
    return (row["files"], row["bytes"]) if row else None


def code(out: dict[str, Any]) -> str | None:
    return None if out["ok"] else out["error"]["code"]


async def test_limits_per_file_and_per_team(db_pool: asyncpg.Pool) -> None:
    team = f"t_{uuid.uuid4().hex[:10]}"
    w = lambda path, n: reply(db_pool, team, "file.write", {"path": path, "content": "x" * n})  # noqa: E731
    # The schema bounds characters (one may be several bytes); the service counts bytes.
    assert code(await reply(db_pool, team, "file.write", {"path": "a", "content": "é" * 51})) == "file_too_large"
    assert code(await w("a", 101)) == "invalid_args"
    assert code(await w("a", 100)) is None
    assert code(await w("b", 100)) is None
    assert code(await w("c", 60)) == "team_storage_full"  # 260 > 250
    assert await usage(db_pool, team) == (2, 200)
    assert code(await w("a", 10)) is None  # replacing frees what the old version used
    assert await usage(db_pool, team) == (2, 110)
    assert code(await w("c", 60)) is None
    assert code(await w("d", 1)) == "team_file_limit"
    assert code(await reply(db_pool, team, "file.delete", {"path": "b"})) is None
    assert await usage(db_pool, team) == (2, 70)
    assert code(await w("d", 1)) is None
    total = await db_pool.fetchrow("SELECT count(*) AS n, sum(size) AS b FROM files WHERE team_id = $1", team)
    assert (total["n"], total["b"]) == (3, 71) and await usage(db_pool, team) == (3, 71)


async def test_concurrent_writers_cannot_overrun_the_team_limit(db_pool: asyncpg.Pool) -> None:
    team = f"t_{uuid.uuid4().hex[:10]}"
    outs = await asyncio.gather(*(reply(db_pool, team, "file.write",
                                        {"path": f"f{i}", "content": "x" * 100}) for i in range(8)))
    assert sorted(str(code(o)) for o in outs) == ["None", "None"] + ["team_storage_full"] * 6
    assert await usage(db_pool, team) == (2, 200)
    assert await db_pool.fetchval("SELECT sum(size) FROM files WHERE team_id = $1", team) == 200


async def test_a_refused_write_leaves_the_old_file(db_pool: asyncpg.Pool) -> None:
    team = f"t_{uuid.uuid4().hex[:10]}"
    assert code(await reply(db_pool, team, "file.write", {"path": "keep", "content": "old"})) is None
    assert code(await reply(db_pool, team, "file.write", {"path": "filler", "content": "y" * 100})) is None
    assert code(await reply(db_pool, team, "file.write", {"path": "filler2", "content": "y" * 100})) is None
    # Replacing `keep` with 100 bytes would need 297 bytes: refused, the old content stays.
    assert code(await reply(db_pool, team, "file.write", {"path": "keep", "content": "n" * 100})) == "team_storage_full"
    read = await reply(db_pool, team, "file.read", {"path": "keep"})
    assert (read["output"]["content"], read["output"]["sha256"]) == ("old", sha(b"old"))
    assert await usage(db_pool, team) == (3, 203)


async def test_a_failed_write_in_the_database_leaves_nothing(db_pool: asyncpg.Pool) -> None:
    """A write whose insert fails after the usage row was taken (here: a digest the table's
    check refuses) rolls the whole transaction back: no file, no usage."""
    team = f"t_{uuid.uuid4().hex[:10]}"
    svc = files.service(db_pool, SMALL)
    (write,) = [t for t in svc.tools if t.manifest.tool_id == "file.write"]

    blob = store.Blob(path="p", data=b"abc", sha256="not-a-digest", media_type="text/plain", tags=[])
    with pytest.raises(asyncpg.CheckViolationError):
        await store.write_file(db_pool, team, "a", blob, SMALL)
    assert await usage(db_pool, team) is None
    assert await db_pool.fetchval("SELECT count(*) FROM files WHERE team_id = $1", team) == 0
    assert isinstance(await write.handler({"path": "p", "content": "abc"}, ctx(team)), ToolResult)
    assert await usage(db_pool, team) == (1, 3)


async def test_excerpts_cut_at_a_character_and_binary_stays_base64(db_pool: asyncpg.Pool) -> None:
    team = f"t_{uuid.uuid4().hex[:10]}"
    text = "éa" * 30  # 90 bytes: over the 40-byte inline bound
    await reply(db_pool, team, "file.write", {"path": "t.txt", "content": text})
    out = (await reply(db_pool, team, "file.read", {"path": "t.txt"}))["output"]
    assert out["truncated"] and out["excerpt"] == "éa" * 5  # 15 bytes: the 16th would split é
    raw = b"\xff\xfe" * 30
    await reply(db_pool, team, "file.write", {"path": "t2.txt", "media_type": "text/plain",
                                              "content_base64": base64.b64encode(raw).decode()})
    out = (await reply(db_pool, team, "file.read", {"path": "t2.txt"}))["output"]
    assert (out["encoding"], base64.b64decode(out["excerpt"])) == ("base64", raw[:16])
    small = b"\x00\x01 text with a NUL"
    await reply(db_pool, team, "file.write", {"path": "n.txt",
                                              "content_base64": base64.b64encode(small).decode()})
    out = (await reply(db_pool, team, "file.read", {"path": "n.txt"}))["output"]
    assert (out["encoding"], base64.b64decode(out["content"])) == ("base64", small)


def test_settings_refuse_inconsistent_limits() -> None:
    with pytest.raises(ValueError):
        FileSettings(max_bytes=10, team_max_bytes=5)
    with pytest.raises(ValueError):
        FileSettings(inline_bytes=10, excerpt_bytes=20)


def test_settings_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLPROXY_FILE_MAX_BYTES", "2048")
    monkeypatch.setenv("TOOLPROXY_FILE_TEAM_MAX_FILES", "7")
    s = FileSettings()
    assert (s.max_bytes, s.team_max_files) == (2048, 7)
    (write,) = [m for m in files.service(None, s).manifests if m.tool_id == "file.write"]  # type: ignore[arg-type]
    assert write.input_schema["properties"]["content"]["maxLength"] == 2048
