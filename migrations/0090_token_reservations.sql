-- Token reservations (TOOLPROXY_LIMITS_STORE=postgres): a metered call holds its estimated
-- tokens on the daily counters of every token quota in scope before it runs, all or none;
-- it is settled to the real figure afterwards. Rows are locked in the order toolproxy_admit
-- locks them (the team's, then the agent's), so the two never deadlock.
CREATE FUNCTION toolproxy_reserve_tokens(
    day_ date, team text, agent text, n bigint, team_limit bigint, agent_limit bigint
) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    used bigint;
BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);
    IF team_limit IS NOT NULL THEN
        INSERT INTO quota_counters AS q (day, team_id, agent_id) VALUES (day_, team, '')
            ON CONFLICT (day, team_id, agent_id) DO UPDATE SET tokens = q.tokens
            RETURNING tokens INTO used;
        IF used + n > team_limit THEN
            RETURN false;
        END IF;
    END IF;
    IF agent_limit IS NOT NULL THEN
        INSERT INTO quota_counters AS q (day, team_id, agent_id) VALUES (day_, team, agent)
            ON CONFLICT (day, team_id, agent_id) DO UPDATE SET tokens = q.tokens
            RETURNING tokens INTO used;
        IF used + n > agent_limit THEN
            RETURN false;
        END IF;
    END IF;
    UPDATE quota_counters SET tokens = tokens + n
        WHERE day = day_ AND team_id = team
          AND ((team_limit IS NOT NULL AND agent_id = '') OR (agent_limit IS NOT NULL AND agent_id = agent));
    RETURN true;
END $$;
