-- search.index / search.lite: each team's internal documents, full-text indexed in Postgres.
-- The tsvector is a generated column (title weighted above the body) with a GIN index that
-- leads with the team (btree_gin), so one team's query never walks another team's postings.

CREATE EXTENSION IF NOT EXISTS btree_gin;

CREATE TABLE search_documents (
    team_id     text NOT NULL,
    doc_id      text NOT NULL,
    title       text NOT NULL,
    body        text NOT NULL,
    tags        text[] NOT NULL DEFAULT '{}',
    tsv         tsvector GENERATED ALWAYS AS (
                    setweight(to_tsvector('english'::regconfig, title), 'A') ||
                    setweight(to_tsvector('english'::regconfig, body), 'B')) STORED,
    indexed_by  text NOT NULL,
    indexed_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (team_id, doc_id)
);
CREATE INDEX search_documents_tsv ON search_documents USING gin (team_id, tsv);
