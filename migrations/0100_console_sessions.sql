-- Console sessions: a governance or admin bearer token exchanged once for a session cookie.
-- Only the SHA-256 of the cookie's secret is kept (a copy of this table opens no session);
-- the identity, the Host it was opened on and the CSRF token travel with it.
CREATE TABLE console_sessions (
    session_hash  bytea PRIMARY KEY CHECK (length(session_hash) = 32),
    agent_id      text NOT NULL,
    team_id       text NOT NULL,
    role          text NOT NULL CHECK (role IN ('governance', 'admin')),
    token_id      text NOT NULL DEFAULT '',
    host          text NOT NULL,
    csrf_token    text NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    expires_at    timestamptz NOT NULL
);
CREATE INDEX console_sessions_expiry ON console_sessions (expires_at);

-- The per-identity rate guard on the console's mutations: one GCRA bucket per identity
-- (its theoretical arrival time, in epoch seconds), shared by every replica.
CREATE TABLE console_rate (
    key         text PRIMARY KEY,
    tat         double precision NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT now()
);
