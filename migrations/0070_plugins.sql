-- Plugins: third-party tools. Each installed version is kept whole (the bundle as uploaded,
-- with its SHA-256); several versions of a plugin side by side, at most one enabled.

CREATE TABLE plugins (
    name          text NOT NULL,               -- the tool id the plugin provides
    version       text NOT NULL,               -- semver
    sha256        text NOT NULL CHECK (sha256 ~ '^[0-9a-f]{64}$'),
    bundle        bytea NOT NULL,              -- the .tar.gz exactly as installed
    size          integer NOT NULL CHECK (size > 0),
    manifest      jsonb NOT NULL,              -- plugin.json, as validated
    tool          jsonb NOT NULL,              -- the catalog entry built from tool.json
    enabled       boolean NOT NULL DEFAULT false,
    installed_by  text NOT NULL,
    installed_at  timestamptz NOT NULL DEFAULT now(),
    enabled_by    text,
    enabled_at    timestamptz,
    PRIMARY KEY (name, version)
);
CREATE UNIQUE INDEX plugins_one_enabled ON plugins (name) WHERE enabled;

CREATE FUNCTION plugins_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('toolproxy_plugins', COALESCE(NEW.name, OLD.name));
    RETURN NULL;
END $$;

CREATE TRIGGER plugins_changed AFTER INSERT OR UPDATE OR DELETE ON plugins
    FOR EACH ROW EXECUTE FUNCTION plugins_notify();
