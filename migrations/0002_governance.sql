-- Governance: per-agent overrides, stored policy revisions, calls awaiting approval,
-- approvals and the decision log.

CREATE TABLE overrides (
    override_id      uuid PRIMARY KEY,
    team_id          text NOT NULL,
    agent_id         text NOT NULL,
    tool             text NOT NULL CHECK (tool ~ '^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$'),
    effect           text NOT NULL CHECK (effect IN ('allow', 'deny')),
    timeout_ms       integer CHECK (timeout_ms > 0),
    rate_per_minute  integer CHECK (rate_per_minute >= 0),
    reason           text NOT NULL DEFAULT '',
    created_by       text NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    expires_at       timestamptz,
    CONSTRAINT overrides_unique UNIQUE (team_id, agent_id, tool)
);
CREATE TRIGGER overrides_changed AFTER INSERT OR UPDATE OR DELETE ON overrides
    FOR EACH ROW EXECUTE FUNCTION grants_notify();

-- Policy revisions pushed through the API; the active one is what every replica serves.
CREATE TABLE policies (
    revision    text PRIMARY KEY,
    modules     jsonb NOT NULL,             -- {"file.rego": "source", ...}
    created_by  text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE policy_active (
    singleton   boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    revision    text NOT NULL REFERENCES policies (revision),
    activated_at timestamptz NOT NULL DEFAULT now()
);
CREATE FUNCTION policy_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('toolproxy_policy', NEW.revision);
    RETURN NULL;
END $$;
CREATE TRIGGER policy_activated AFTER INSERT OR UPDATE ON policy_active
    FOR EACH ROW EXECUTE FUNCTION policy_notify();

-- A call kept for later: awaiting approval (and, with the lifecycle issue, every call).
CREATE TABLE calls (
    call_id       uuid PRIMARY KEY,
    team_id       text NOT NULL,
    agent_id      text NOT NULL,
    agent_run_id  text,
    tool          text NOT NULL,
    args          jsonb,                    -- NULL in confidential mode: only hash and size kept
    args_hash     text NOT NULL,
    args_size     integer NOT NULL,
    confidential  boolean NOT NULL DEFAULT false,
    status        text NOT NULL,
    http_status   integer,
    response      jsonb,                    -- the body returned, for replays of a resume
    decision_id   uuid,
    created_at    timestamptz NOT NULL DEFAULT now(),
    finished_at   timestamptz
);
CREATE INDEX calls_team_created ON calls (team_id, created_at);

CREATE TABLE approvals (
    approval_id      uuid PRIMARY KEY,
    call_id          uuid NOT NULL UNIQUE REFERENCES calls (call_id),
    team_id          text NOT NULL,
    agent_id         text NOT NULL,
    tool             text NOT NULL,
    args_hash        text NOT NULL,
    state            text NOT NULL CHECK (state IN
                       ('pending', 'approved', 'denied', 'expired', 'executing', 'executed')),
    reasons          jsonb NOT NULL DEFAULT '[]',
    policy_revision  text NOT NULL,
    requested_at     timestamptz NOT NULL DEFAULT now(),
    expires_at       timestamptz NOT NULL,
    decided_by       text,
    decided_at       timestamptz,
    decision_reason  text,
    finalized        boolean NOT NULL DEFAULT false  -- a denied/expired call's ending recorded
);
CREATE INDEX approvals_team_state ON approvals (team_id, state, requested_at);

-- The decision log: every decision, written off the request path through JetStream.
CREATE TABLE decisions (
    decision_id      uuid PRIMARY KEY,
    time             timestamptz NOT NULL,
    policy_revision  text NOT NULL,
    engine           text NOT NULL,
    team_id          text NOT NULL,
    agent_id         text NOT NULL,
    roles            jsonb NOT NULL,
    tool             text NOT NULL,
    phase            text NOT NULL,
    result           text NOT NULL CHECK (result IN ('allow', 'deny', 'approval_required', 'error')),
    reasons          jsonb NOT NULL,
    error_code       text,
    latency_us       double precision NOT NULL,
    call_id          uuid,
    input            jsonb                  -- redacted; hashes and sizes only in confidential mode
);
CREATE INDEX decisions_team_time ON decisions (team_id, time);
CREATE INDEX decisions_call ON decisions (call_id);
