-- project.* and the rest of task.*: projects per team, tasks that may belong to one, and a
-- version on both for optimistic concurrency (an update names the version it read).

CREATE TABLE projects (
    project_id   uuid PRIMARY KEY,
    team_id      text NOT NULL,
    name         text NOT NULL CHECK (btrim(name) <> ''),
    description  text NOT NULL DEFAULT '',
    status       text NOT NULL DEFAULT 'active'
                 CHECK (status IN ('active', 'on_hold', 'completed', 'archived')),
    version      integer NOT NULL DEFAULT 1 CHECK (version >= 1),
    created_by   text NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT projects_team_name UNIQUE (team_id, name),
    CONSTRAINT projects_team_id UNIQUE (team_id, project_id)
);
CREATE INDEX projects_team_status ON projects (team_id, status, updated_at);

ALTER TABLE tasks
    ADD COLUMN project_id    uuid,
    ADD COLUMN assignee      text,
    ADD COLUMN version       integer NOT NULL DEFAULT 1 CHECK (version >= 1),
    ADD COLUMN updated_at    timestamptz,
    ADD COLUMN completed_at  timestamptz;
UPDATE tasks SET updated_at = created_at,
                 completed_at = CASE WHEN status = 'done' THEN created_at END;
ALTER TABLE tasks
    ALTER COLUMN updated_at SET NOT NULL,
    ALTER COLUMN updated_at SET DEFAULT now(),
    -- The team is part of the key: a task can only belong to a project of its own team.
    ADD CONSTRAINT tasks_project FOREIGN KEY (team_id, project_id)
        REFERENCES projects (team_id, project_id);
CREATE INDEX tasks_team_project ON tasks (team_id, project_id, created_at)
    WHERE project_id IS NOT NULL;
