-- Standing approvals: governance pre-approves a tool for a team (or one agent) within an
-- argument constraint, until an expiry, for at most max_calls calls. Calls count against it
-- with one conditional UPDATE, so no number of replicas can go past max_calls.
CREATE TABLE standing_approvals (
    standing_approval_id  uuid PRIMARY KEY,
    team_id               text NOT NULL,
    agent_id              text,                      -- NULL: every agent of the team
    tool                  text NOT NULL CHECK (tool ~ '^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$'),
    args                  jsonb,                     -- exact values the call's arguments must have
    args_schema           jsonb,                     -- a small JSON Schema they must match
    expires_at            timestamptz NOT NULL,
    max_calls             integer NOT NULL CHECK (max_calls > 0),
    used_calls            integer NOT NULL DEFAULT 0
                          CHECK (used_calls >= 0 AND used_calls <= max_calls),
    reason                text NOT NULL DEFAULT '',
    created_by            text NOT NULL,
    creator_agent         text NOT NULL,             -- never applies to its creator's own calls
    creator_team          text NOT NULL,
    created_at            timestamptz NOT NULL DEFAULT now(),
    revoked_at            timestamptz,
    revoked_by            text
);
CREATE INDEX standing_approvals_team ON standing_approvals (team_id, tool);

-- Every replica keeps the live ones in memory: a NOTIFY names the team whose set changed.
-- Counting a call is not a change of the set, unless it exhausts (or a refund revives) one.
CREATE FUNCTION standing_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE'
       AND OLD.revoked_at IS NOT DISTINCT FROM NEW.revoked_at
       AND OLD.expires_at = NEW.expires_at
       AND (OLD.used_calls >= OLD.max_calls) = (NEW.used_calls >= NEW.max_calls) THEN
        RETURN NULL;
    END IF;
    PERFORM pg_notify('toolproxy_standing', COALESCE(NEW.team_id, OLD.team_id));
    RETURN NULL;
END $$;
CREATE TRIGGER standing_changed AFTER INSERT OR UPDATE OR DELETE ON standing_approvals
    FOR EACH ROW EXECUTE FUNCTION standing_notify();

-- A held call whose service prepares exactly what will run (a wallet's transaction): the
-- approval shows it (preview) and is bound to its hash (binding).
ALTER TABLE approvals ADD COLUMN preview jsonb, ADD COLUMN binding text;

-- The wallet's transactions, one per call: prepared (what governance sees) -> signing ->
-- signed (raw bytes kept before anything is sent) -> sent -> mined; or refused / failed,
-- with nothing sent. A sender's nonce is signed at most once per chain.
CREATE TABLE wallet_transactions (
    call_id         uuid PRIMARY KEY,
    team_id         text NOT NULL,
    agent_id        text NOT NULL,
    tool            text NOT NULL,
    authorization_kind text NOT NULL CHECK (authorization_kind IN ('per_call', 'standing')),
    from_address    text NOT NULL,
    chain_id        numeric(20, 0) NOT NULL,
    nonce           numeric(20, 0) NOT NULL,
    tx              jsonb NOT NULL,
    signing_hash    text NOT NULL,
    state           text NOT NULL CHECK (state IN
                      ('prepared', 'signing', 'signed', 'sent', 'mined', 'refused', 'failed')),
    error_code      text,
    raw_tx          text,
    tx_hash         text,
    receipt_status  smallint,
    block_number    numeric(20, 0),
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX wallet_transactions_nonce_once ON wallet_transactions (chain_id, from_address, nonce)
    WHERE state IN ('signed', 'sent', 'mined');
CREATE INDEX wallet_transactions_team ON wallet_transactions (team_id, created_at);
