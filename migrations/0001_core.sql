-- Core schema: catalog, grants, usage and its daily rollup.

CREATE TABLE tools (
    name           text PRIMARY KEY,
    manifest       jsonb NOT NULL,
    manifest_hash  text NOT NULL,
    updated_at     timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE grants (
    grant_id    uuid PRIMARY KEY,
    team_id     text NOT NULL,
    agent_id    text,                      -- NULL: every agent of the team
    capability  text NOT NULL,             -- tool.<name>.invoke, exact (no wildcards)
    created_by  text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz,
    CONSTRAINT grants_unique UNIQUE NULLS NOT DISTINCT (team_id, agent_id, capability),
    CONSTRAINT grants_capability CHECK (capability ~ '^tool\.[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*\.invoke$')
);
CREATE INDEX grants_team ON grants (team_id);

-- Every proxy replica LISTENs on this channel and reloads its grant cache.
CREATE FUNCTION grants_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('toolproxy_grants', COALESCE(NEW.team_id, OLD.team_id));
    RETURN NULL;
END $$;
CREATE TRIGGER grants_changed AFTER INSERT OR UPDATE OR DELETE ON grants
    FOR EACH ROW EXECUTE FUNCTION grants_notify();

CREATE TABLE usage_records (
    call_id        uuid PRIMARY KEY,
    result_id      uuid,
    decision_id    uuid,
    team_id        text NOT NULL,
    agent_id       text NOT NULL,
    agent_run_id   text,
    tool           text NOT NULL,
    category       text NOT NULL,
    action         text NOT NULL,
    decision       text NOT NULL,          -- allow | deny
    status         text NOT NULL,          -- COMPLETED, FAILED, DENIED, UNAVAILABLE, ...
    error_code     text,
    http_status    integer NOT NULL,
    latency_ms     double precision NOT NULL,
    tokens_used    bigint NOT NULL DEFAULT 0,
    compute_units  double precision NOT NULL DEFAULT 0,
    cost_1t        double precision NOT NULL DEFAULT 0,
    started_at     timestamptz NOT NULL,
    finished_at    timestamptz NOT NULL,
    day            date NOT NULL
);
CREATE INDEX usage_records_team_day ON usage_records (team_id, day);

CREATE TABLE usage_daily (
    day            date NOT NULL,
    team_id        text NOT NULL,
    agent_id       text NOT NULL,
    tool           text NOT NULL,
    category       text NOT NULL,
    calls          bigint NOT NULL DEFAULT 0,  -- every recorded call, denied ones included
    invocations    bigint NOT NULL DEFAULT 0,  -- calls that reached the tool
    completed      bigint NOT NULL DEFAULT 0,
    failed         bigint NOT NULL DEFAULT 0,
    denied         bigint NOT NULL DEFAULT 0,
    tokens_used    bigint NOT NULL DEFAULT 0,
    compute_units  double precision NOT NULL DEFAULT 0,
    cost_1t        double precision NOT NULL DEFAULT 0,
    latency_ms_sum double precision NOT NULL DEFAULT 0,
    PRIMARY KEY (day, team_id, agent_id, tool)
);

-- Category B: tasks, per team.
CREATE TABLE tasks (
    task_id      uuid PRIMARY KEY,
    team_id      text NOT NULL,
    title        text NOT NULL,
    description  text NOT NULL DEFAULT '',
    status       text NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'in_progress', 'done')),
    created_by   text NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX tasks_team_status ON tasks (team_id, status, created_at);

-- Category D: the GREENFOOD platform (products are global; orders belong to a team).
CREATE TABLE greenfood_products (
    product_id  text PRIMARY KEY,
    name        text NOT NULL,
    price       numeric(12, 2) NOT NULL CHECK (price >= 0),
    stock       integer NOT NULL CHECK (stock >= 0)
);
INSERT INTO greenfood_products (product_id, name, price, stock) VALUES
    ('apple', 'Apple', 0.50, 500),
    ('bread', 'Bread', 2.20, 120),
    ('milk',  'Milk',  1.10, 200);

CREATE TABLE greenfood_orders (
    order_id    uuid PRIMARY KEY,
    team_id     text NOT NULL,
    agent_id    text NOT NULL,
    product_id  text NOT NULL REFERENCES greenfood_products (product_id),
    qty         integer NOT NULL CHECK (qty > 0),
    status      text NOT NULL DEFAULT 'created',
    created_at  timestamptz NOT NULL DEFAULT now()
);
