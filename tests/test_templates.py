"""Agent templates (seed 001) through the whole pipeline: read by default, each write by its
own grant, refusals before any effect, the version rule, optimistic concurrency, the
template.updated event, and agents that drift rather than change."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import asyncpg
import pytest

from services.templates import service as templates
from services.sdk import ToolError
from services.sdk.service import CallContext, ToolResult
from services.templates.agents import create_from_template, detect_drift, get_agent, sync_agent
from services.templates.ops import Template, updated
from tests.support.calls import invoke
from tests.support.data_helpers import BOUNDARY, assert_bad_input, events_of, grant_tools, ok, tool_failure

WRITES = ("template.create", "template.update", "template.delete")
MISSING = "00000000-0000-4000-8000-000000000000"


def new(name: str = "Reviewer", content: str = "# Reviewer\nRead the diff.") -> dict[str, Any]:
    return {"name": name, "content_md": content, "default_profile_id": "profile-default"}


async def count(db_pool: asyncpg.Pool, team: str) -> int:
    return await db_pool.fetchval("SELECT count(*) FROM templates WHERE team_id = $1", team)


async def seeded(client: Any, token: Any, team: str, **fields: Any) -> dict[str, Any]:
    """A template created by a separate agent that holds the create grant."""
    await grant_tools(client, token, team, "template.create", agent="seeder")
    return (await ok(client, token(agent="seeder", team=team), "template.create",
                     {**new(), **fields}))["output"]


# --- default read-only ----------------------------------------------------------------------


async def test_an_agent_without_a_grant_lists_and_reads(client, token, team) -> None:
    t = await seeded(client, token, team)
    tok = token(agent="reader", team=team)
    listed = (await ok(client, tok, "template.list"))["output"]
    assert listed == {"templates": [{k: t[k] for k in ("template_id", "name", "version",
                                                        "default_profile_id", "updated_at")}],
                      "count": 1}
    read = await ok(client, tok, "template.read", {"template_id": t["template_id"]})
    assert read["output"] == t
    assert (t["version"], t["name"], t["content_md"]) == (1, "Reviewer", "# Reviewer\nRead the diff.")
    # And the catalog it sees offers the reads, never the writes.
    r = await client.get("/v1/tools", headers={"Authorization": f"Bearer {tok}"})
    names = {e["tool_id"] for e in (await r.json())["tools"]}
    assert {"template.list", "template.read"} <= names and not names & set(WRITES)


async def test_writes_are_refused_before_any_effect_without_a_grant(
        client, token, team, db_pool, bus_spy) -> None:
    t = await seeded(client, token, team)
    tok = token(agent="reader", team=team)
    calls = {
        "template.create": new("Other"),
        "template.update": {"template_id": t["template_id"], "content_md": "# changed"},
        "template.delete": {"template_id": t["template_id"]},
    }
    for tool, args in calls.items():
        await bus_spy.settle()
        bus_spy.subjects.clear()
        status, body = await invoke(client, tok, tool, args)
        await bus_spy.settle()
        assert (status, body["status"], body["error"]["reasons"]) == (403, "DENIED", ["grant_required"])
        assert not [s for s in bus_spy.subjects if s.endswith(".invoke")], tool
    assert await count(db_pool, team) == 1
    read = await ok(client, tok, "template.read", {"template_id": t["template_id"]})
    assert read["output"] == t


async def test_a_grant_for_template_update_allows_only_that(client, token, team, db_pool) -> None:
    t = await seeded(client, token, team)
    await grant_tools(client, token, team, "template.update", agent="editor")
    tok = token(agent="editor", team=team)
    for tool, args in (("template.create", new("Other")),
                       ("template.delete", {"template_id": t["template_id"]})):
        status, body = await invoke(client, tok, tool, args)
        assert (status, body["error"]["reasons"]) == (403, ["grant_required"]), tool
    out = (await ok(client, tok, "template.update",
                    {"template_id": t["template_id"], "content_md": "# v2"}))["output"]
    assert (out["version"], out["content_md"], out["changed"]) == (2, "# v2", True)
    assert await count(db_pool, team) == 1


# --- the version rule and concurrency -------------------------------------------------------


async def test_version_bumps_only_when_the_content_changes(client, token, team) -> None:
    t = await seeded(client, token, team)
    await grant_tools(client, token, team, "template.update", agent="editor")
    tok = token(agent="editor", team=team)
    tid = t["template_id"]

    async def update(**fields: Any) -> dict[str, Any]:
        return (await ok(client, tok, "template.update", {"template_id": tid, **fields}))["output"]

    renamed = await update(name="Senior reviewer", default_profile_id="profile-2")
    assert (renamed["version"], renamed["name"], renamed["default_profile_id"]) == (
        1, "Senior reviewer", "profile-2")
    assert (renamed["changed"], renamed["content_changed"]) == (True, False)
    same = await update(content_md=t["content_md"])  # the same content: no bump, no change
    assert (same["version"], same["changed"]) == (1, False)
    v2 = await update(content_md="# Reviewer v2", expected_version=1)
    assert (v2["version"], v2["content_changed"]) == (2, True)
    v3 = await update(content_md="# Reviewer v3", name="Lead reviewer")
    assert (v3["version"], v3["name"]) == (3, "Lead reviewer")


async def test_expected_version_conflicts_on_update_and_delete(client, token, team) -> None:
    t = await seeded(client, token, team)
    await grant_tools(client, token, team, "template.update", "template.delete", agent="editor")
    tok = token(agent="editor", team=team)
    tid = t["template_id"]
    await ok(client, tok, "template.update", {"template_id": tid, "content_md": "# v2"})
    stale = await tool_failure(client, tok, "template.update",
                               {"template_id": tid, "content_md": "# lost", "expected_version": 1},
                               409, "version_conflict")
    assert "version 2, not 1" in stale["error"]["message"]
    await tool_failure(client, tok, "template.delete", {"template_id": tid, "expected_version": 1},
                       409, "version_conflict")
    read = (await ok(client, tok, "template.read", {"template_id": tid}))["output"]
    assert (read["version"], read["content_md"]) == (2, "# v2")
    gone = await ok(client, tok, "template.delete", {"template_id": tid, "expected_version": 2})
    assert gone["output"] == {"template_id": tid, "deleted": True}
    await tool_failure(client, tok, "template.read", {"template_id": tid}, 404, "not_found")


async def test_concurrent_updates_of_one_version_let_exactly_one_through(client, token, team) -> None:
    t = await seeded(client, token, team)
    await grant_tools(client, token, team, "template.update", agent="editor")
    tok = token(agent="editor", team=team)
    results = await asyncio.gather(*(
        invoke(client, tok, "template.update",
               {"template_id": t["template_id"], "content_md": f"# edit {i}", "expected_version": 1})
        for i in range(5)))
    statuses = sorted(status for status, _ in results)
    assert statuses == [200, 409, 409, 409, 409], results
    (winner,) = [b for s, b in results if s == 200]
    read = (await ok(client, tok, "template.read", {"template_id": t["template_id"]}))["output"]
    assert (read["version"], read["content_md"]) == (2, winner["output"]["content_md"])


async def test_a_failed_update_leaves_the_old_version(client, token, team) -> None:
    t = await seeded(client, token, team)
    other = await seeded(client, token, team, name="Taken")
    await grant_tools(client, token, team, "template.update", agent="editor")
    tok = token(agent="editor", team=team)
    # The content would bump the version, but the new name is taken: nothing is written.
    await tool_failure(client, tok, "template.update",
                       {"template_id": t["template_id"], "content_md": "# v2", "name": "Taken"},
                       409, "conflict")
    read = (await ok(client, tok, "template.read", {"template_id": t["template_id"]}))["output"]
    assert read == t
    assert other["name"] == "Taken"
    status, body = await invoke(client, token(agent="seeder", team=team), "template.create", new("Taken"))
    assert (status, body["error"]["tool_code"]) == (409, "conflict")


async def test_another_teams_template_is_not_found(client, token, team) -> None:
    t = await seeded(client, token, team)
    other = f"t_{uuid.uuid4().hex[:10]}"
    await grant_tools(client, token, other, "template.update", "template.delete")
    tok = token(agent="intruder", team=other)
    assert (await ok(client, tok, "template.list"))["output"] == {"templates": [], "count": 0}
    await tool_failure(client, tok, "template.read", {"template_id": t["template_id"]}, 404, "not_found")
    await tool_failure(client, tok, "template.update",
                       {"template_id": t["template_id"], "content_md": "# mine"}, 404, "not_found")
    await tool_failure(client, tok, "template.delete", {"template_id": t["template_id"]}, 404, "not_found")
    read = (await ok(client, token(team=team), "template.read", {"template_id": t["template_id"]}))
    assert read["output"] == t


@pytest.mark.parametrize("args, where", [
    ({"name": "", "content_md": "x", "default_profile_id": "p"}, "$.name"),
    ({"name": "   ", "content_md": "x", "default_profile_id": "p"}, "$.name"),
    ({"name": "a\u0000b", "content_md": "x", "default_profile_id": "p"}, BOUNDARY),
    ({"name": "n", "content_md": "x\u0000", "default_profile_id": "p"}, BOUNDARY),
    ({"name": "n", "content_md": "x" * 65_537, "default_profile_id": "p"}, "$.content_md"),
    ({"name": "n", "content_md": "x", "default_profile_id": "../etc"}, "$.default_profile_id"),
    ({"name": "n", "content_md": "x"}, "$"),
    ({"name": "n", "content_md": "x", "default_profile_id": "p", "version": 7}, "$"),
])
async def test_bad_create_args_are_refused_with_nothing_written(
        client, token, team, db_pool, args, where) -> None:
    await grant_tools(client, token, team, "template.create")
    status, body = await invoke(client, token(team=team), "template.create", args)
    assert_bad_input(status, body, where)
    assert await count(db_pool, team) == 0


async def test_an_update_that_names_nothing_to_change_is_refused(client, token, team) -> None:
    t = await seeded(client, token, team)
    await grant_tools(client, token, team, "template.update")
    status, body = await invoke(client, token(team=team), "template.update",
                                {"template_id": t["template_id"], "expected_version": 1})
    assert (status, body["error"]["code"]) == (400, "invalid_args"), body


# --- the template.updated event -------------------------------------------------------------


async def test_an_update_writes_a_template_updated_event(client, token, team) -> None:
    t = await seeded(client, token, team)
    await grant_tools(client, token, team, "template.update", agent="editor")
    tok = token(agent="editor", team=team)
    body = await ok(client, tok, "template.update",
                    {"template_id": t["template_id"], "content_md": "# v2", "name": "R2"})
    events = await events_of(client, tok, body["call_id"], want="template.updated")
    (updated_event,) = [e for e in events if e["type"] == "template.updated"]
    assert updated_event["refs"] == {"template_id": t["template_id"], "tool": "template.update"}
    assert updated_event["payload"] == {
        "template_id": t["template_id"], "name": "R2", "version": 2, "previous_version": 1,
        "content_changed": True, "changed": ["name", "content_md"]}
    types = [e["type"] for e in events]
    assert types.index("template.updated") < types.index("agent.tool.completed")
    # No change, no event.
    same = await ok(client, tok, "template.update", {"template_id": t["template_id"], "name": "R2"})
    later = await events_of(client, tok, same["call_id"], want="agent.tool.completed")
    assert [e["type"] for e in later if e["type"] == "template.updated"] == []


# --- agents created from a template drift; they are not changed -----------------------------


async def test_an_update_leaves_agents_created_from_the_template_unchanged(
        client, token, team, db_pool) -> None:
    t = await seeded(client, token, team)
    tid = t["template_id"]
    made = await create_from_template(db_pool, team, "agent-a", tid)
    await create_from_template(db_pool, team, "agent-b", tid, synchronized=False)
    assert (made.synced_template_version, made.content_md, made.profile_id) == (
        1, t["content_md"], "profile-default")
    await grant_tools(client, token, team, "template.update", agent="editor")
    tok = token(agent="editor", team=team)
    await ok(client, tok, "template.update",
             {"template_id": tid, "content_md": "# v2", "default_profile_id": "profile-2"})
    # The agent keeps its content and profile: it drifts (only synchronized agents count).
    assert await get_agent(db_pool, team, "agent-a") == made
    (drift,) = await detect_drift(db_pool, team)
    assert (drift.agent_id, drift.synced_template_version, drift.template_version) == ("agent-a", 1, 2)
    # A change that is not content bumps nothing, so it adds no drift.
    await ok(client, tok, "template.update", {"template_id": tid, "name": "Renamed"})
    assert [d.template_version for d in await detect_drift(db_pool, team)] == [2]
    # The explicit sync takes the current content; the profile stays the agent's own.
    synced = await sync_agent(db_pool, team, "agent-a")
    assert (synced.content_md, synced.synced_template_version, synced.profile_id) == (
        "# v2", 2, "profile-default")
    assert await detect_drift(db_pool, team) == []
    # A deleted template leaves its agents as they are; drift detection ignores them.
    await grant_tools(client, token, team, "template.delete", agent="editor")
    await ok(client, tok, "template.update", {"template_id": tid, "content_md": "# v3"})
    await ok(client, tok, "template.delete", {"template_id": tid})
    assert await get_agent(db_pool, team, "agent-a") == synced
    assert await detect_drift(db_pool, team) == []
    with pytest.raises(ToolError) as missing:
        await sync_agent(db_pool, team, "agent-a")
    assert missing.value.code == "not_found"


# --- the domain rules, without the pipeline -------------------------------------------------


def test_the_domain_refuses_a_blank_name_and_an_empty_update() -> None:
    t = Template("id", "Name", "# c", 1, "p")
    with pytest.raises(ToolError) as blank:
        updated(t, name="  ")
    assert blank.value.code == "invalid"
    with pytest.raises(ToolError) as empty:
        updated(t)
    assert empty.value.code == "invalid"
    assert updated(t, content_md="# c").after.version == 1
    assert updated(t, content_md="# d").after.version == 2


async def test_the_service_refuses_a_blank_name_sent_past_the_schema(db_pool: asyncpg.Pool) -> None:
    svc = templates.service(db_pool)
    (create,) = [d for d in svc.tools if d.manifest.tool_id == "template.create"]
    team = f"t_{uuid.uuid4().hex[:10]}"
    ctx = CallContext(call_id=str(uuid.uuid4()), decision_id="d", team_id=team, agent_id="a",
                      run_id=None, deadline=time.time() + 5)
    with pytest.raises(ToolError) as exc:
        await create.handler({"name": "\t", "content_md": "x", "default_profile_id": "p"}, ctx)
    assert exc.value.code == "invalid"
    made = await create.handler(new(), ctx)
    assert isinstance(made, ToolResult) and made.output["version"] == 1
    assert await count(db_pool, team) == 1
