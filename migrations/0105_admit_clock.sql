-- toolproxy_admit reads the clock after locking its buckets (as the NATS store's leases read it
-- when their round computes): the caller's time, read before its round trip and any wait for
-- the rows' locks, is the earliest the call can be taken at; the later of it and the
-- database's clock is used. Otherwise as 0006.
CREATE OR REPLACE FUNCTION toolproxy_admit(
    agent_key text, agent_interval float8, agent_tolerance float8,
    team_key text, team_interval float8, team_tolerance float8,
    now_s float8, day_ date, team text, agent text, count_agent boolean,
    q_team_inv bigint, q_team_tok bigint, q_team_cu float8, q_team_cost float8,
    q_agent_inv bigint, q_agent_tok bigint, q_agent_cu float8, q_agent_cost float8,
    OUT code text, OUT reason text, OUT retry_after float8
) LANGUAGE plpgsql AS $$
DECLARE
    a_tat float8; t_tat float8; a_wait float8; t_wait float8;
    count_team boolean := (q_team_inv IS NOT NULL OR q_team_tok IS NOT NULL
                           OR q_team_cu IS NOT NULL OR q_team_cost IS NOT NULL);
    tc quota_counters; ac quota_counters;
BEGIN
    -- Counters may lose the last fraction of a second of increments if Postgres crashes
    -- (an undercount, bounded by wal_writer_delay); no admission waits for a WAL flush.
    PERFORM set_config('synchronous_commit', 'off', true);
    -- Insert-or-lock in one statement per bucket (the no-op update takes the row lock).
    INSERT INTO rate_buckets AS b (key, tat) VALUES (agent_key, now_s)
        ON CONFLICT (key) DO UPDATE SET tat = b.tat RETURNING b.tat INTO a_tat;
    INSERT INTO rate_buckets AS b (key, tat) VALUES (team_key, now_s)
        ON CONFLICT (key) DO UPDATE SET tat = b.tat RETURNING b.tat INTO t_tat;
    -- The time is read once both rows are locked: a call that waited for another's lock (or
    -- whose caller read its clock a round trip ago) computes with the time it runs at, not one
    -- older than the other call's, which would see the bucket emptier than it is.
    now_s := greatest(now_s, extract(epoch FROM clock_timestamp()));
    a_tat := greatest(a_tat, now_s);
    t_tat := greatest(t_tat, now_s);
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

    IF count_team THEN
        INSERT INTO quota_counters AS q (day, team_id, agent_id) VALUES (day_, team, '')
            ON CONFLICT (day, team_id, agent_id) DO UPDATE SET invocations = q.invocations
            RETURNING * INTO tc;
        reason := CASE
            WHEN q_team_inv IS NOT NULL AND tc.invocations >= q_team_inv THEN 'quota_invocations'
            WHEN q_team_tok IS NOT NULL AND tc.tokens >= q_team_tok THEN 'quota_tokens'
            WHEN q_team_cu IS NOT NULL AND tc.compute_units >= q_team_cu THEN 'quota_compute_units'
            WHEN q_team_cost IS NOT NULL AND tc.cost_1t >= q_team_cost THEN 'quota_cost_1t'
        END;
    END IF;
    IF reason IS NULL AND count_agent THEN
        INSERT INTO quota_counters AS q (day, team_id, agent_id) VALUES (day_, team, agent)
            ON CONFLICT (day, team_id, agent_id) DO UPDATE SET invocations = q.invocations
            RETURNING * INTO ac;
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

    UPDATE rate_buckets SET tat = CASE WHEN key = agent_key THEN a_tat + agent_interval
                                       ELSE t_tat + team_interval END
        WHERE key IN (agent_key, team_key);
    IF count_team OR count_agent THEN
        UPDATE quota_counters SET invocations = invocations + 1
            WHERE day = day_ AND team_id = team
              AND ((count_team AND agent_id = '') OR (count_agent AND agent_id = agent));
    END IF;
END $$;
