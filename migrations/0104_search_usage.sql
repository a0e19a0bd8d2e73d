-- What each team has indexed for search.lite, kept in step with `search_documents` inside the
-- same transaction as each upsert; its row lock serializes a team's indexing, so two writers
-- cannot both slip under the team's bounds. Filled once from the documents already there.
CREATE TABLE search_usage (
    team_id  text PRIMARY KEY,
    docs     bigint NOT NULL DEFAULT 0 CHECK (docs >= 0),
    bytes    bigint NOT NULL DEFAULT 0 CHECK (bytes >= 0)
);

INSERT INTO search_usage (team_id, docs, bytes)
SELECT team_id, count(*), coalesce(sum(octet_length(title) + octet_length(body)), 0)
FROM search_documents GROUP BY team_id;
