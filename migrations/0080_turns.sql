-- Turns: an agent's unit of work above the gateway (USER -> ... -> RESULT), durable so a turn
-- held on an authorization can be resumed from any replica. Calls and events name their turn.

CREATE TABLE turns (
    turn_id           uuid PRIMARY KEY,
    team_id           text NOT NULL,
    agent_id          text NOT NULL,
    run_id            text NOT NULL,
    agent             text NOT NULL CHECK (agent IN ('demo', 'model')),
    status            text NOT NULL CHECK (status IN
                          ('RUNNING', 'AUTHORIZATION_REQUIRED', 'COMPLETED', 'FAILED', 'CANCELLED')),
    input             text NOT NULL,
    state             jsonb NOT NULL DEFAULT '{}',   -- the agent's own resumable state
    held              jsonb NOT NULL DEFAULT '[]',   -- the calls it waits on: [{call_id, approval_id, ...}]
    result            jsonb,
    error             jsonb,
    calls_made        integer NOT NULL DEFAULT 0 CHECK (calls_made >= 0),
    tokens_used       bigint NOT NULL DEFAULT 0 CHECK (tokens_used >= 0),
    step_count        integer NOT NULL DEFAULT 0,
    owner             text,                          -- the replica driving it while RUNNING
    cancel_requested  boolean NOT NULL DEFAULT false,
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    finished_at       timestamptz
);
CREATE INDEX turns_run ON turns (team_id, run_id);
CREATE INDEX turns_running ON turns (updated_at) WHERE status = 'RUNNING';

CREATE TABLE turn_steps (
    turn_id  uuid NOT NULL REFERENCES turns (turn_id) ON DELETE CASCADE,
    seq      integer NOT NULL,
    kind     text NOT NULL,
    time     timestamptz NOT NULL,
    call_id  uuid,
    body     jsonb NOT NULL DEFAULT '{}',
    PRIMARY KEY (turn_id, seq)
);

ALTER TABLE calls ADD COLUMN turn_id uuid;
CREATE INDEX calls_turn ON calls (turn_id) WHERE turn_id IS NOT NULL;
ALTER TABLE events ADD COLUMN turn_id uuid;
