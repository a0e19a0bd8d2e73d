"""Bench populations as users load the proxy, each as a wrk Lua script: the realistic mix (the
same `math` calls as the hot case, from 200 agents in 20 teams with their own tokens, rotated
per request, each naming its own registered run with a budget, under the shipped per-agent
limits) and the tools mix (mostly `math` and `text`, some `task.list` and `search.lite` with
grants, some `data.query`, a few denied and a few rate-limited calls); and, after a run, whether
the agents' run budgets counted exactly the calls that reached their tool."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

import aiohttp
import asyncpg

from cli.up import Stack
from proxy.config import Settings
from proxy.identity.tokens import mint

TEAMS, AGENTS_PER_TEAM = 20, 10
BUDGET_CALLS = 1_000_000_000  # a budget every call is counted against, never reached

# The shipped ceilings (proxy/config.py team_rate_per_minute; pdp/policies/authz.rego
# category_rate_per_minute), and what the bench stack raises: category A's team ceiling, which
# only the hot case's single team would reach (ten agents at the shipped 600/min make 6,000/min,
# the shipped ceiling itself: raised, it binds none of the mix's teams sooner than their agents).
SHIPPED_TEAM_PER_MINUTE = {"A": 6000, "B": 1200, "C": 300, "D": 50}
SHIPPED_AGENT_PER_MINUTE = {"A": 600, "B": 120, "C": 30, "D": 5}
RAISED = "team ceiling A raised (the hot case's one team would bind it); B, C, D and every " \
         "per-agent rate as shipped (A 600/min, B 120, C 30)"

# The tools mix: (weight in 100, tool, a Lua expression of the request's counter `n` giving
# the arguments: new ones on every call).
TOOLS_MIX = [
    (40, "math", """string.format('{"expr":"%d+3*4"}', n)"""),
    (30, "text", """string.format('{"op":"upper","text":"hello %d"}', n)"""),
    (8, "task.list", """string.format('{"limit":%d}', n % 20 + 1)"""),
    (8, "search.lite", """string.format('{"query":"report %d","limit":3}', n)"""),
    (6, "data.query", """string.format('{"query":"tasks_by_status","params":{"status":"%s"}}',
                                      ({"open", "in_progress", "done"})[n % 3 + 1])"""),
    (4, "file.list", """string.format('{"prefix":"d%d/"}', n)"""),  # not granted: denied
    (4, "text", """string.format('{"op":"lower","text":"LIMITED %d"}', n)"""),  # 1/min for its agent
]
GRANTED = ("task.list", "search.lite", "data.query")


@dataclass
class Agent:
    team: str
    agent: str
    token: str
    run_id: str


def teams() -> list[str]:
    return [f"mix-{t:02d}" for t in range(TEAMS)]


async def populate(stack: Stack, *, tools: bool = False) -> list[Agent]:
    """The 200 agents, their tokens and registered budgeted runs; with `tools`, the grants and
    the one limited agent per team as well."""
    settings = Settings(data_dir=stack.data_dir)
    admin = mint(settings, agent_id="bench-admin", team_id="ops", role="admin", ttl_s=3600)
    agents = [Agent(team, f"{team}-a{i}", "", f"run-{team}-a{i}")
              for team in teams() for i in range(AGENTS_PER_TEAM)]
    for a in agents:
        a.token = mint(settings, agent_id=a.agent, team_id=a.team, ttl_s=3600)
    async with aiohttp.ClientSession() as s:
        async def post(path: str, token: str, body: dict) -> None:
            for _ in range(100):  # ready means a catalog, not yet every service's tools
                async with s.post(f"{stack.url}{path}", json=body,
                                  headers={"Authorization": f"Bearer {token}"}) as r:
                    if r.status in (200, 201, 409):
                        return
                    if r.status != 404:
                        raise RuntimeError(f"{path}: {r.status} {await r.text()}")
                await asyncio.sleep(0.1)

        await asyncio.gather(*(post("/v1/runs", a.token, {
            "run_id": a.run_id, "budget": {"max_calls": BUDGET_CALLS}}) for a in agents))
        if tools:
            for team in teams():
                for tool in GRANTED:
                    await post("/v1/admin/grants", admin,
                               {"team_id": team, "capability": f"tool.{tool}.invoke"})
                await post("/v1/admin/overrides", admin, {
                    "team_id": team, "agent_id": f"{team}-a{AGENTS_PER_TEAM - 1}", "tool": "text",
                    "effect": "allow", "rate_per_minute": 1, "reason": "benchmark: rate-limited"})
    return agents


def realistic_lua(agents: list[Agent]) -> str:
    """`math` with a new expression per request; the agent (token, team, run) rotates per
    request across all 200, the two wrk threads interleaved."""
    return _lua(agents, [(1, "math", """string.format('{"expr":"%d+3*4"}', n)""")])


def tools_lua(agents: list[Agent]) -> str:
    """The tools mix; the rate-limited share always from each team's last agent."""
    return _lua(agents, TOOLS_MIX, limited_last=True)


def _lua(agents: list[Agent], mix: list[tuple[int, str, str]], limited_last: bool = False) -> str:
    rows = ",\n".join(f'{{"{a.token}","{a.team}","{a.run_id}"}}' for a in agents)
    slots = []
    for i, (weight, tool, args) in enumerate(mix):
        limited = limited_last and i == len(mix) - 1
        slots.append(f'{{"{tool}", function(n) return {args} end, {str(limited).lower()}, {weight}}}')
    return f'''
local agents = {{
{rows}
}}
local slots = {{ {", ".join(slots)} }}
local total = 0
for _, s in ipairs(slots) do total = total + s[4] end
local counter, tid = 0, 0
local threads = {{}}
function setup(thread) thread:set("tid", #threads + 1); table.insert(threads, thread) end
function init(args) tid = tonumber(wrk.thread:get("tid")); math.randomseed(tid * 7919) end
local function pick()
  local r = math.random(total)
  for _, s in ipairs(slots) do
    if r <= s[4] then return s end
    r = r - s[4]
  end
end
request = function()
  counter = counter + 1
  local n = counter * 7919 + tid  -- unique per request across threads; n % 200 visits every agent
  local slot = pick()
  local a
  if slot[3] then
    a = agents[((n % {TEAMS}) + 1) * {AGENTS_PER_TEAM}]
  else
    a = agents[(n % #agents) + 1]
  end
  local body = string.format(
    '{{"tool":"%s","args":%s,"context":{{"team_id":"%s","agent_run_id":"%s"}}}}',
    slot[1], slot[2](n), a[2], a[3])
  return wrk.format("POST", "/v1/tools/invoke",
    {{["Content-Type"] = "application/json", ["Authorization"] = "Bearer " .. a[1]}}, body)
end
'''


async def budgets_against_calls(stack: Stack, agents: list[Agent], *, wait_s: float = 10.0) -> str:
    """After the load: what the 200 runs' budgets counted (`GET /v1/runs/{id}`, with each
    agent's token) against the calls on record that reached their tool (a call counts against its
    run once it is handed to its tool; one refused or cancelled before then is given back).
    Give-backs land off the request path: asked again until the two agree or `wait_s` passes."""
    async with aiohttp.ClientSession() as s:
        async def counted(a: Agent) -> int:
            async with s.get(f"{stack.url}/v1/runs/{a.run_id}",
                             headers={"Authorization": f"Bearer {a.token}"}) as r:
                r.raise_for_status()
                return int((await r.json())["used"]["calls"])

        conn = await asyncpg.connect(stack.database_url)
        try:
            deadline = time.monotonic() + wait_s
            while True:
                budgets = sum(await asyncio.gather(*(counted(a) for a in agents)))
                row = await conn.fetchrow(
                    """SELECT count(*) FILTER (WHERE started_at IS NOT NULL) AS ran,
                              count(*) AS all_calls,
                              count(*) FILTER (WHERE status = 'CANCELLED') AS cancelled
                       FROM calls WHERE agent_run_id = ANY($1::text[])""",
                    [a.run_id for a in agents])
                if budgets == row["ran"] or time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.2)
        finally:
            await conn.close()
    verdict = "exact" if budgets == row["ran"] else f"OFF BY {budgets - row['ran']:+d}"
    return (f"run budgets after the load: {len(agents)} runs counted {budgets:,} calls; the "
            f"calls table holds {row['ran']:,} of theirs that reached their tool "
            f"({row['all_calls']:,} in all, {row['cancelled']:,} cancelled): {verdict}")
