-- Limits kept in Postgres (TOOLPROXY_LIMITS_STORE=postgres): GCRA buckets and daily counters,
-- checked and taken in one function call (one round trip per admission).

-- Rate state is worth little after a crash (buckets refill within a minute): not WAL-logged.
CREATE UNLOGGED TABLE rate_buckets (
    key  text PRIMARY KEY,
    tat  double precision NOT NULL     -- theoretical arrival time, epoch seconds
);

CREATE TABLE quota_counters (
    day            date NOT NULL,
    team_id        text NOT NULL,
    agent_id       text NOT NULL DEFAULT '',   -- '' : the whole team
    invocations    bigint NOT NULL DEFAULT 0,
    tokens         bigint NOT NULL DEFAULT 0,
    compute_units  double precision NOT NULL DEFAULT 0,
    cost_1t        double precision NOT NULL DEFAULT 0,
    PRIMARY KEY (day, team_id, agent_id)
);

-- Returns (code, reason, retry_after): code NULL when admitted. Nothing is taken unless
-- everything admits: both buckets and every quota in scope.
CREATE FUNCTION toolproxy_admit(
    agent_key text, agent_interval float8, agent_tolerance float8,
    team_key text, team_interval float8, team_tolerance float8,
    now_s float8, day_ date, team text, agent text, count_agent boolean,
    q_team_inv bigint, q_team_tok bigint, q_team_cu float8, q_team_cost float8,
    q_agent_inv bigint, q_agent_tok bigint, q_agent_cu float8, q_agent_cost float8,
    OUT code text, OUT reason text, OUT retry_after float8
) LANGUAGE plpgsql AS $$
DECLARE
    a_tat float8; t_tat float8; a_wait float8; t_wait float8;
    tc quota_counters; ac quota_counters;
BEGIN
    -- Counters may lose the last fraction of a second of increments if Postgres crashes
    -- (an undercount, bounded by wal_writer_delay); no admission waits for a WAL flush.
    PERFORM set_config('synchronous_commit', 'off', true);
    INSERT INTO rate_buckets (key, tat) VALUES (agent_key, now_s), (team_key, now_s)
        ON CONFLICT (key) DO NOTHING;
    SELECT greatest(tat, now_s) INTO a_tat FROM rate_buckets WHERE key = agent_key FOR UPDATE;
    SELECT greatest(tat, now_s) INTO t_tat FROM rate_buckets WHERE key = team_key FOR UPDATE;
    a_wait := CASE WHEN agent_interval IS NULL THEN 'infinity'::float8
                   ELSE (a_tat - agent_tolerance) - now_s END;
    t_wait := CASE WHEN team_interval IS NULL THEN 'infinity'::float8
                   ELSE (t_tat - team_tolerance) - now_s END;
    IF a_wait > 0 OR t_wait > 0 THEN
        code := 'rate_limited';
        IF a_wait >= t_wait THEN reason := 'agent_tool_rate'; retry_after := a_wait;
        ELSE reason := 'team_category_rate'; retry_after := t_wait; END IF;
        RETURN;
    END IF;

    INSERT INTO quota_counters (day, team_id, agent_id) VALUES (day_, team, '')
        ON CONFLICT DO NOTHING;
    SELECT * INTO tc FROM quota_counters WHERE day = day_ AND team_id = team AND agent_id = ''
        FOR UPDATE;
    reason := CASE
        WHEN q_team_inv IS NOT NULL AND tc.invocations >= q_team_inv THEN 'quota_invocations'
        WHEN q_team_tok IS NOT NULL AND tc.tokens >= q_team_tok THEN 'quota_tokens'
        WHEN q_team_cu IS NOT NULL AND tc.compute_units >= q_team_cu THEN 'quota_compute_units'
        WHEN q_team_cost IS NOT NULL AND tc.cost_1t >= q_team_cost THEN 'quota_cost_1t'
    END;
    IF reason IS NULL AND count_agent THEN
        INSERT INTO quota_counters (day, team_id, agent_id) VALUES (day_, team, agent)
            ON CONFLICT DO NOTHING;
        SELECT * INTO ac FROM quota_counters WHERE day = day_ AND team_id = team AND agent_id = agent
            FOR UPDATE;
        reason := CASE
            WHEN q_agent_inv IS NOT NULL AND ac.invocations >= q_agent_inv THEN 'quota_invocations'
            WHEN q_agent_tok IS NOT NULL AND ac.tokens >= q_agent_tok THEN 'quota_tokens'
            WHEN q_agent_cu IS NOT NULL AND ac.compute_units >= q_agent_cu THEN 'quota_compute_units'
            WHEN q_agent_cost IS NOT NULL AND ac.cost_1t >= q_agent_cost THEN 'quota_cost_1t'
        END;
    END IF;
    IF reason IS NOT NULL THEN
        code := 'quota_exceeded';
        retry_after := extract(epoch FROM ((day_ + 1)::timestamp AT TIME ZONE 'UTC')) - now_s;
        RETURN;
    END IF;

    UPDATE rate_buckets SET tat = a_tat + agent_interval WHERE key = agent_key;
    UPDATE rate_buckets SET tat = t_tat + team_interval WHERE key = team_key;
    UPDATE quota_counters SET invocations = invocations + 1
        WHERE day = day_ AND team_id = team AND (agent_id = '' OR (count_agent AND agent_id = agent));
END $$;
