-- Upstreams: MCP servers an organisation already runs (streamable HTTP, or stdio from the
-- operator's allowlist), registered by admins. Their tools are candidates until governance
-- classifies one; a classified tool is pinned to its definition's hash and refused
-- (tool_changed) while the upstream's current definition differs, until approved again.

CREATE TABLE upstreams (
    name             text PRIMARY KEY CHECK (name ~ '^[a-z][a-z0-9_]{0,31}$'),
    transport        text NOT NULL CHECK (transport IN ('streamable_http', 'stdio', 'openapi')),
    url              text,                       -- streamable_http
    command          text,                       -- stdio: a name in TOOLPROXY_UPSTREAM_COMMANDS
    args             text[] NOT NULL DEFAULT '{}',
    secret_header    text,
    secret_sealed    bytea,                      -- infra/secret_box.py, bound to 'upstream:<name>'
    secret_key_id    text,
    timeout_ms       integer NOT NULL CHECK (timeout_ms BETWEEN 100 AND 10000),
    max_concurrency  integer NOT NULL CHECK (max_concurrency BETWEEN 1 AND 256),
    created_by       text NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    synced_at        timestamptz,
    sync_error       text,
    CHECK ((transport = 'stdio') = (command IS NOT NULL)),
    CHECK ((transport = 'stdio') <> (url IS NOT NULL))
);

CREATE TABLE upstream_tools (
    upstream           text NOT NULL REFERENCES upstreams (name) ON DELETE CASCADE,
    tool               text NOT NULL,            -- the upstream's own name for it
    tool_id            text UNIQUE,              -- the catalog's name, once classified
    source             text NOT NULL DEFAULT 'upstream' CHECK (source IN ('upstream', 'openapi')),
    state              text NOT NULL CHECK (state IN ('candidate', 'classified', 'changed', 'gone')),
    hash               text NOT NULL,            -- of the current definition
    definition         jsonb NOT NULL,           -- name, title, description, schemas, annotations
    flags              text[] NOT NULL DEFAULT '{}',  -- why governance must read it closely
    pinned_hash        text,
    pinned_definition  jsonb,
    classification     jsonb,                    -- {category, action, risk, cost, requires_approval}
    classified_by      text,
    classified_at      timestamptz,
    seen_at            timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (upstream, tool),
    CHECK ((state = 'candidate') = (pinned_hash IS NULL))
);

CREATE FUNCTION upstreams_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('toolproxy_upstreams', COALESCE(NEW.name, OLD.name, ''));
    RETURN NULL;
END $$;

CREATE FUNCTION upstream_tools_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('toolproxy_upstreams', COALESCE(NEW.upstream, OLD.upstream));
    RETURN NULL;
END $$;

CREATE TRIGGER upstreams_changed AFTER INSERT OR UPDATE OR DELETE ON upstreams
    FOR EACH ROW EXECUTE FUNCTION upstreams_notify();
CREATE TRIGGER upstream_tools_changed AFTER INSERT OR UPDATE OR DELETE ON upstream_tools
    FOR EACH ROW EXECUTE FUNCTION upstream_tools_notify();
