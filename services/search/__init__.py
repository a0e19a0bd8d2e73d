"""Category B search: search.index adds or replaces a team document, search.lite finds them
(Postgres full-text search: a generated tsvector, a GIN index, websearch_to_tsquery, ts_rank,
ts_headline snippets)."""
