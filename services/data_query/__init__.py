"""Category C `data.query`: named, parameterized, read-only, team-scoped queries on Postgres."""
