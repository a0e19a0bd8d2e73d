-- Daily quotas per team ('' as agent_id: the whole team) or per agent. NULL limit: unlimited.
CREATE TABLE quotas (
    team_id        text NOT NULL,
    agent_id       text NOT NULL DEFAULT '',
    invocations    bigint CHECK (invocations >= 0),
    tokens         bigint CHECK (tokens >= 0),
    compute_units  double precision CHECK (compute_units >= 0),
    cost_1t        double precision CHECK (cost_1t >= 0),
    updated_by     text NOT NULL,
    updated_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (team_id, agent_id)
);
-- Same channel as grants and overrides: a replica reloads the team's access data at once.
CREATE TRIGGER quotas_changed AFTER INSERT OR UPDATE OR DELETE ON quotas
    FOR EACH ROW EXECUTE FUNCTION grants_notify();
