-- The Rego unit tests a revision was pushed with and their results (the push runs them and
-- refuses a failing set): what the console shows beside the serving revision.
CREATE TABLE policy_test_runs (
    revision    text PRIMARY KEY REFERENCES policies (revision),
    tests       jsonb NOT NULL,             -- {"x_test.rego": "source", ...}
    results     jsonb NOT NULL,             -- [{"package", "name", "passed", "error"}, ...]
    ran_at      timestamptz NOT NULL DEFAULT now()
);
