-- Call lifecycle: every call a durable object, idempotency keys, runs, events, artifacts,
-- and the replicas' heartbeats (to resolve calls a crashed replica left running).

ALTER TABLE calls
    ALTER COLUMN args_hash DROP NOT NULL,
    ALTER COLUMN args_size DROP NOT NULL,
    ADD COLUMN result_id       uuid,
    ADD COLUMN owner           text,          -- the replica instance that runs it
    ADD COLUMN started_at      timestamptz,
    ADD COLUMN deadline_at     timestamptz,
    ADD COLUMN latency_ms      double precision,
    ADD COLUMN idempotency_key text,
    ADD COLUMN diagnostic      text,
    ADD COLUMN refs            jsonb;         -- object_refs, artifacts, observations, provenance_refs
CREATE INDEX calls_running ON calls (status, deadline_at) WHERE status = 'RUNNING';
CREATE INDEX calls_run ON calls (team_id, agent_run_id) WHERE agent_run_id IS NOT NULL;

CREATE TABLE proxy_instances (
    instance_id  text PRIMARY KEY,
    started_at   timestamptz NOT NULL DEFAULT now(),
    last_seen    timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE idempotency_keys (
    team_id      text NOT NULL,
    key          text NOT NULL,
    intent_hash  text NOT NULL,               -- tool, args and context: same key, same intent
    call_id      uuid NOT NULL,
    state        text NOT NULL CHECK (state IN ('in_progress', 'done')),
    http_status  integer,
    response     jsonb,
    created_at   timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz NOT NULL,
    PRIMARY KEY (team_id, key)
);
CREATE INDEX idempotency_expiry ON idempotency_keys (expires_at);

CREATE TABLE runs (
    team_id       text NOT NULL,
    run_id        text NOT NULL,
    agent_id      text NOT NULL,
    status        text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'completed')),
    max_calls     bigint CHECK (max_calls >= 0),
    max_tokens    bigint CHECK (max_tokens >= 0),
    max_cost_1t   double precision CHECK (max_cost_1t >= 0),
    calls_used    bigint NOT NULL DEFAULT 0,
    tokens_used   bigint NOT NULL DEFAULT 0,
    cost_used_1t  double precision NOT NULL DEFAULT 0,
    plan          jsonb,
    outcome       text,
    created_at    timestamptz NOT NULL DEFAULT now(),
    completed_at  timestamptz,
    PRIMARY KEY (team_id, run_id)
);

-- Events get a per-team, gap-free, increasing sequence, allocated in batches by the writer.
CREATE TABLE event_counters (
    team_id  text PRIMARY KEY,
    last     bigint NOT NULL DEFAULT 0
);
CREATE TABLE events (
    team_id   text NOT NULL,
    sequence  bigint NOT NULL,
    event_id  uuid NOT NULL UNIQUE,
    type      text NOT NULL,
    time      timestamptz NOT NULL,
    run_id    text,
    call_id   uuid,
    refs      jsonb NOT NULL DEFAULT '{}',
    payload   jsonb NOT NULL DEFAULT '{}',
    PRIMARY KEY (team_id, sequence)
);
CREATE INDEX events_time ON events (time);

-- Outputs larger than the inline bound, kept whole and referenced from the call.
CREATE TABLE artifacts (
    artifact_id  uuid PRIMARY KEY,
    team_id      text NOT NULL,
    call_id      uuid NOT NULL,
    kind         text NOT NULL,
    media_type   text NOT NULL,
    bytes        integer NOT NULL,
    sha256       text NOT NULL,
    content      bytea NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX artifacts_call ON artifacts (call_id);

-- A call awaiting approval can be cancelled by its agent (or governance).
ALTER TABLE approvals DROP CONSTRAINT approvals_state_check;
ALTER TABLE approvals ADD CONSTRAINT approvals_state_check CHECK (state IN
    ('pending', 'approved', 'denied', 'expired', 'cancelled', 'executing', 'executed'));
