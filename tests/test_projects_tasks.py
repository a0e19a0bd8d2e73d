"""project.* and the completed task.* through the whole pipeline: tasks in projects,
optimistic concurrency (a stale version is 409 version_conflict with nothing written), team
isolation (404), and the two new named queries."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from proxy.web.native import TOOL_ERROR_HTTP, tool_error_status
from tests.support.calls import invoke
from tests.support.data_helpers import BOUNDARY, assert_bad_input, grant_tools, ok, tool_failure

PROJECT_TOOLS = ("project.list", "project.get", "project.create", "project.update")
TASK_TOOLS = ("task.list", "task.get", "task.create", "task.update", "task.complete", "task.assign")
MISSING = "00000000-0000-4000-8000-000000000000"


async def setup(client, token, team, *extra: str) -> str:
    await grant_tools(client, token, team, *PROJECT_TOOLS, *TASK_TOOLS, *extra)
    return token(team=team)


async def test_projects_create_list_get_update(client, token, team) -> None:
    tok = await setup(client, token, team)
    p = (await ok(client, tok, "project.create", {"name": "Launch", "description": "v1"}))["output"]
    assert (p["name"], p["description"], p["status"], p["version"], p["created_by"]) == (
        "Launch", "v1", "active", 1, "agent-1")
    await ok(client, tok, "project.create", {"name": "Research"})
    listed = (await ok(client, tok, "project.list"))["output"]
    assert [x["name"] for x in listed["projects"]] == ["Research", "Launch"]
    got = (await ok(client, tok, "project.get", {"project_id": p["project_id"]}))["output"]
    assert got == {**p, "task_counts": {"open": 0, "in_progress": 0, "done": 0}}

    u = (await ok(client, tok, "project.update", {"project_id": p["project_id"],
                                                  "expected_version": 1, "status": "on_hold"}))
    assert (u["output"]["status"], u["output"]["version"], u["output"]["changed"]) == ("on_hold", 2, True)
    same = (await ok(client, tok, "project.update", {"project_id": p["project_id"],
                                                     "expected_version": 2, "status": "on_hold"}))
    assert (same["output"]["version"], same["output"]["changed"]) == (2, False)
    held = (await ok(client, tok, "project.list", {"status": "on_hold"}))["output"]["projects"]
    assert [x["project_id"] for x in held] == [p["project_id"]]


async def test_a_stale_project_update_is_409_and_writes_nothing(client, token, team) -> None:
    tok = await setup(client, token, team)
    p = (await ok(client, tok, "project.create", {"name": "Launch"}))["output"]
    await ok(client, tok, "project.update", {"project_id": p["project_id"], "expected_version": 1,
                                             "name": "Launch v2"})
    body = await tool_failure(client, tok, "project.update",
                              {"project_id": p["project_id"], "expected_version": 1,
                               "description": "lost update"}, 409, "version_conflict")
    assert "version 2, not 1" in body["error"]["message"]
    got = (await ok(client, tok, "project.get", {"project_id": p["project_id"]}))["output"]
    assert (got["name"], got["description"], got["version"]) == ("Launch v2", "", 2)


async def test_project_names_are_unique_in_a_team(client, token, team) -> None:
    tok = await setup(client, token, team)
    await ok(client, tok, "project.create", {"name": "Launch"})
    other = (await ok(client, tok, "project.create", {"name": "Other"}))["output"]
    await tool_failure(client, tok, "project.create", {"name": "Launch"}, 409, "conflict")
    await tool_failure(client, tok, "project.update", {"project_id": other["project_id"],
                                                       "expected_version": 1, "name": "Launch",
                                                       "status": "archived"}, 409, "conflict")
    got = (await ok(client, tok, "project.get", {"project_id": other["project_id"]}))["output"]
    assert (got["name"], got["status"], got["version"]) == ("Other", "active", 1)


async def test_tasks_in_projects_update_complete_assign(client, token, team) -> None:
    tok = await setup(client, token, team)
    p = (await ok(client, tok, "project.create", {"name": "Launch"}))["output"]
    t = (await ok(client, tok, "task.create", {"title": "Write docs", "project_id": p["project_id"]}))
    assert t["object_refs"] == [{"type": "task", "id": t["output"]["task_id"]},
                                {"type": "project", "id": p["project_id"]}]
    task = t["output"]
    assert (task["project_id"], task["version"], task["status"]) == (p["project_id"], 1, "open")
    await ok(client, tok, "task.create", {"title": "Loose end"})
    in_project = (await ok(client, tok, "task.list", {"project_id": p["project_id"]}))["output"]
    assert [x["title"] for x in in_project["tasks"]] == ["Write docs"]
    assert (await ok(client, tok, "task.list"))["output"]["count"] == 2

    tid = task["task_id"]
    u = (await ok(client, tok, "task.update", {"task_id": tid, "expected_version": 1,
                                               "status": "in_progress", "title": "Write the docs"}))["output"]
    assert (u["status"], u["title"], u["version"], u["changed"]) == ("in_progress", "Write the docs", 2, True)
    a = (await ok(client, tok, "task.assign", {"task_id": tid, "expected_version": 2,
                                               "assignee": "agent-7"}))["output"]
    assert (a["assignee"], a["version"]) == ("agent-7", 3)
    c = (await ok(client, tok, "task.complete", {"task_id": tid, "expected_version": 3}))["output"]
    assert (c["status"], c["version"]) == ("done", 4) and c["completed_at"]
    again = (await ok(client, tok, "task.complete", {"task_id": tid, "expected_version": 4}))["output"]
    assert (again["version"], again["changed"], again["completed_at"]) == (4, False, c["completed_at"])
    counts = (await ok(client, tok, "project.get", {"project_id": p["project_id"]}))["output"]["task_counts"]
    assert counts == {"open": 0, "in_progress": 0, "done": 1}
    reopened = (await ok(client, tok, "task.update", {"task_id": tid, "expected_version": 4,
                                                      "status": "open", "project_id": None}))["output"]
    assert (reopened["status"], reopened["completed_at"], reopened["project_id"]) == ("open", None, None)
    unassigned = (await ok(client, tok, "task.assign", {"task_id": tid, "expected_version": 5,
                                                        "assignee": None}))["output"]
    assert unassigned["assignee"] is None
    got = (await ok(client, tok, "task.get", {"task_id": tid}))["output"]
    assert got == {k: v for k, v in unassigned.items() if k != "changed"}


async def test_stale_task_writes_are_409_and_write_nothing(client, token, team) -> None:
    tok = await setup(client, token, team)
    tid = (await ok(client, tok, "task.create", {"title": "t"}))["output"]["task_id"]
    await ok(client, tok, "task.update", {"task_id": tid, "expected_version": 1, "description": "d"})
    for tool, args in (("task.update", {"title": "lost"}), ("task.complete", {}),
                       ("task.assign", {"assignee": "agent-9"})):
        await tool_failure(client, tok, tool, {"task_id": tid, "expected_version": 1, **args},
                           409, "version_conflict")
    got = (await ok(client, tok, "task.get", {"task_id": tid}))["output"]
    assert (got["title"], got["status"], got["assignee"], got["version"]) == ("t", "open", None, 2)


async def test_concurrent_task_updates_of_one_version_let_one_through(client, token, team) -> None:
    tok = await setup(client, token, team)
    tid = (await ok(client, tok, "task.create", {"title": "t"}))["output"]["task_id"]
    results = await asyncio.gather(*(invoke(client, tok, "task.update", {
        "task_id": tid, "expected_version": 1, "title": f"edit {i}"}) for i in range(6)))
    assert sorted(s for s, _ in results) == [200] + [409] * 5
    got = (await ok(client, tok, "task.get", {"task_id": tid}))["output"]
    (winner,) = [b["output"]["title"] for s, b in results if s == 200]
    assert (got["version"], got["title"]) == (2, winner)


async def test_another_teams_projects_and_tasks_are_not_found(client, token, team) -> None:
    tok = await setup(client, token, team)
    p = (await ok(client, tok, "project.create", {"name": "Mine"}))["output"]
    tid = (await ok(client, tok, "task.create", {"title": "mine"}))["output"]["task_id"]
    other = f"t_{uuid.uuid4().hex[:10]}"
    otok = await setup(client, token, other)
    await tool_failure(client, otok, "project.get", {"project_id": p["project_id"]}, 404, "not_found")
    await tool_failure(client, otok, "project.update", {"project_id": p["project_id"],
                                                        "expected_version": 1, "name": "x"},
                       404, "not_found")
    await tool_failure(client, otok, "task.get", {"task_id": tid}, 404, "not_found")
    await tool_failure(client, otok, "task.complete", {"task_id": tid, "expected_version": 1},
                       404, "not_found")
    # Nor can another team file a task under this team's project (the key includes the team).
    await tool_failure(client, otok, "task.create", {"title": "x", "project_id": p["project_id"]},
                       404, "not_found")
    own = (await ok(client, otok, "task.create", {"title": "theirs"}))["output"]["task_id"]
    await tool_failure(client, otok, "task.update", {"task_id": own, "expected_version": 1,
                                                     "project_id": p["project_id"]}, 404, "not_found")
    assert (await ok(client, otok, "task.get", {"task_id": own}))["output"]["project_id"] is None
    assert (await ok(client, otok, "project.list"))["output"]["count"] == 0
    got = (await ok(client, tok, "task.get", {"task_id": tid}))["output"]
    assert (got["status"], got["version"]) == ("open", 1)


@pytest.mark.parametrize("tool, args, where", [
    ("project.create", {"name": ""}, "$.name"),
    ("project.create", {"name": "x\u0000"}, BOUNDARY),
    ("project.create", {"name": "x", "description": "d" * 4001}, "$.description"),
    ("project.update", {"project_id": MISSING, "expected_version": 1}, "$"),
    ("project.update", {"project_id": MISSING, "expected_version": 2 ** 31, "name": "x"},
     "$.expected_version"),
    ("project.update", {"project_id": MISSING, "expected_version": 2 ** 70, "name": "x"},
     BOUNDARY),
    ("project.update", {"project_id": MISSING, "expected_version": 1, "status": "done"}, "$.status"),
    ("project.get", {"project_id": "not-a-uuid"}, "$.project_id"),
    ("task.update", {"task_id": MISSING, "expected_version": 1}, "$"),
    ("task.update", {"task_id": MISSING, "name": "x"}, "$"),
    ("task.assign", {"task_id": MISSING, "expected_version": 1}, "$"),
    ("task.assign", {"task_id": MISSING, "expected_version": 1, "assignee": "a b"}, "$.assignee"),
    ("task.complete", {"task_id": MISSING}, "$"),
    ("task.create", {"title": "x", "project_id": "nope"}, "$.project_id"),
])
async def test_bad_args_are_400_before_anything_runs(client, token, team, db_pool,
                                                     tool, args, where) -> None:
    tok = await setup(client, token, team)
    status, body = await invoke(client, tok, tool, args)
    assert_bad_input(status, body, where)
    n = await db_pool.fetchval("SELECT count(*) FROM projects WHERE team_id = $1", team)
    assert n == 0


async def test_writes_need_their_own_grants(client, token, team, db_pool) -> None:
    await grant_tools(client, token, team, "project.list", "project.get", "task.get")
    tok = token(team=team)
    for tool, args in (("project.create", {"name": "x"}),
                       ("project.update", {"project_id": MISSING, "expected_version": 1, "name": "x"}),
                       ("task.update", {"task_id": MISSING, "expected_version": 1, "title": "x"}),
                       ("task.complete", {"task_id": MISSING, "expected_version": 1}),
                       ("task.assign", {"task_id": MISSING, "expected_version": 1, "assignee": None})):
        status, body = await invoke(client, tok, tool, args)
        assert (status, body["error"]["reasons"]) == (403, ["grant_required"]), tool
    assert await db_pool.fetchval("SELECT count(*) FROM projects WHERE team_id = $1", team) == 0


# --- data.query: files_by_tag, projects_by_status ------------------------------------------


async def test_named_queries_files_by_tag_and_projects_by_status(client, token, team) -> None:
    tok = await setup(client, token, team, "data.query", "file.write")
    p = (await ok(client, tok, "project.create", {"name": "Launch"}))["output"]
    await ok(client, tok, "project.create", {"name": "Paused"})
    await ok(client, tok, "task.create", {"title": "a", "project_id": p["project_id"]})
    done = (await ok(client, tok, "task.create", {"title": "b", "project_id": p["project_id"]}))["output"]
    await ok(client, tok, "task.complete", {"task_id": done["task_id"], "expected_version": 1})
    paused = (await ok(client, tok, "project.list"))["output"]["projects"][0]
    await ok(client, tok, "project.update", {"project_id": paused["project_id"],
                                             "expected_version": 1, "status": "on_hold"})
    rows = (await ok(client, tok, "data.query", {"query": "projects_by_status",
                                                 "params": {"status": "active"}}))["output"]["rows"]
    assert [(r["name"], r["tasks"], r["open_tasks"], r["version"]) for r in rows] == [("Launch", 2, 1, 1)]
    assert rows[0]["project_id"] == p["project_id"]

    await ok(client, tok, "file.write", {"path": "b.md", "content": "x", "tags": ["spec", "q4"]})
    await ok(client, tok, "file.write", {"path": "a.md", "content": "y", "tags": ["spec"]})
    await ok(client, tok, "file.write", {"path": "c.md", "content": "z", "tags": ["q4"]})
    out = (await ok(client, tok, "data.query", {"query": "files_by_tag",
                                                "params": {"tag": "spec"}}))["output"]
    assert [(r["path"], r["tags"]) for r in out["rows"]] == [("a.md", ["spec"]), ("b.md", ["q4", "spec"])]
    # Another team sees none of it.
    other = f"t_{uuid.uuid4().hex[:10]}"
    await grant_tools(client, token, other, "data.query")
    out = (await ok(client, token(team=other), "data.query",
                    {"query": "files_by_tag", "params": {"tag": "spec"}}))["output"]
    assert out["rows"] == []
    status, body = await invoke(client, tok, "data.query", {"query": "files_by_tag",
                                                            "params": {"tag": "x'; --"}})
    assert (status, body["error"]["code"]) == (400, "invalid_args")


# --- how tool errors render ----------------------------------------------------------------


def test_tool_error_codes_map_to_http_statuses_in_one_place() -> None:
    assert tool_error_status("not_found") == 404
    assert tool_error_status("version_conflict") == tool_error_status("conflict") == 409
    assert tool_error_status("invalid_path") == 400
    assert tool_error_status("widget_broken") == tool_error_status("team_storage_full") == 200
    assert set(TOOL_ERROR_HTTP.values()) <= {400, 404, 409, 413}


async def test_an_unmapped_tool_error_is_still_200_failed(client, token, team) -> None:
    status, body = await invoke(client, token(team=team), "testsvc.fail", {})
    assert (status, body["status"], body["error"]["code"], body["error"]["tool_code"]) == (
        200, "FAILED", "tool_error", "widget_broken")
