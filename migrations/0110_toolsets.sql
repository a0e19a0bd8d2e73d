-- Tool sets: governance names a subset of the catalog for its team, served as its own MCP
-- endpoint (/mcp/sets/<name>, still filtered by the list- and call-phase policy). A name is
-- the team's own: another team's set of the same name is another set, and never visible.
CREATE TABLE toolsets (
    team_id      text NOT NULL,
    name         text NOT NULL CHECK (name ~ '^[a-z][a-z0-9_-]{0,63}$'),
    tools        text[] NOT NULL CHECK (cardinality(tools) BETWEEN 1 AND 128),
    description  text NOT NULL DEFAULT '' CHECK (length(description) <= 500),
    created_by   text NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_by   text NOT NULL,
    updated_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (team_id, name)
);

-- Every replica keeps the sets in memory: a NOTIFY names the team whose sets changed.
CREATE FUNCTION toolsets_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('toolproxy_toolsets', COALESCE(NEW.team_id, OLD.team_id));
    RETURN NULL;
END $$;

CREATE TRIGGER toolsets_changed AFTER INSERT OR UPDATE OR DELETE ON toolsets
    FOR EACH ROW EXECUTE FUNCTION toolsets_notify();
