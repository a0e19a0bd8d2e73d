-- Registered agents (agent.invoke): an agent serves `agents.<agent_id>.invoke` over NATS and
-- is invoked by agents of its own team. Ids are global (they name the NATS subject); a team
-- only ever sees and invokes its own.
CREATE TABLE agents (
    agent_id      text PRIMARY KEY,
    team_id       text NOT NULL,
    description   text NOT NULL,
    input_schema  jsonb NOT NULL,
    created_by    text NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX agents_team ON agents (team_id, agent_id);
