-- template.*: agent templates per team (seed 001): a name, Markdown content, a version that
-- starts at 1 and is bumped only when the content changes, and a default profile.

CREATE TABLE templates (
    template_id         uuid PRIMARY KEY,
    team_id             text NOT NULL,
    name                text NOT NULL CHECK (btrim(name) <> ''),
    content_md          text NOT NULL,
    version             integer NOT NULL DEFAULT 1 CHECK (version >= 1),
    default_profile_id  text NOT NULL,
    created_by          text NOT NULL,
    updated_by          text NOT NULL,
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT templates_team_name UNIQUE (team_id, name)
);
CREATE INDEX templates_team_updated ON templates (team_id, updated_at);

-- Agents created from a template keep their own copy of its content and the version they
-- were synchronized to. A template update never touches them: they drift
-- (templates.version > synced_template_version) until an explicit sync. No foreign key: a
-- deleted template leaves its agents as they are, and drift detection ignores them.
CREATE TABLE template_agents (
    team_id                  text NOT NULL,
    agent_id                 text NOT NULL,
    template_id              uuid NOT NULL,
    synchronized             boolean NOT NULL DEFAULT true,
    synced_template_version  integer NOT NULL CHECK (synced_template_version >= 1),
    content_md               text NOT NULL,
    profile_id               text NOT NULL,
    created_at               timestamptz NOT NULL DEFAULT now(),
    synced_at                timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (team_id, agent_id)
);
CREATE INDEX template_agents_template ON template_agents (team_id, template_id);
