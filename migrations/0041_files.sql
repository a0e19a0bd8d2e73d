-- file.*: each team's internal storage, blobs in Postgres. Paths are stored normalized and
-- compared byte by byte (C collation), so a prefix listing is an index range scan.

CREATE TABLE files (
    team_id     text NOT NULL,
    path        text COLLATE "C" NOT NULL,
    size        integer NOT NULL CHECK (size >= 0),
    sha256      text NOT NULL CHECK (sha256 ~ '^[0-9a-f]{64}$'),
    media_type  text NOT NULL,
    tags        text[] NOT NULL DEFAULT '{}',
    content     bytea NOT NULL,
    created_by  text NOT NULL,
    updated_by  text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (team_id, path),
    CHECK (octet_length(content) = size)
);
CREATE INDEX files_team_tags ON files USING gin (team_id, tags);

-- What each team stores, kept in step with `files` inside the same transaction; its row lock
-- also serializes a team's writes, so two writers cannot both slip under the team's limit.
CREATE TABLE file_usage (
    team_id  text PRIMARY KEY,
    files    integer NOT NULL DEFAULT 0 CHECK (files >= 0),
    bytes    bigint NOT NULL DEFAULT 0 CHECK (bytes >= 0)
);
