-- Team rules: a team's governance tightens its own team's decisions, one exact tool at a
-- time (deny it, require an approval for each call, a lower rate or a shorter deadline).
-- They only ever tighten, and only for the team that owns them; the policy reads them from
-- its input (`team_rules`), so both engines see them without a policy push. Changes reach
-- every replica through the grants channel (the same per-team cache reload).
CREATE TABLE team_rules (
    team_id           text NOT NULL,
    tool              text NOT NULL CHECK (tool ~ '^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$'),
    deny              boolean NOT NULL DEFAULT false,
    require_approval  boolean NOT NULL DEFAULT false,
    timeout_ms        integer CHECK (timeout_ms > 0),
    rate_per_minute   integer CHECK (rate_per_minute >= 0),
    reason            text NOT NULL DEFAULT '',
    created_by        text NOT NULL,
    created_at        timestamptz NOT NULL DEFAULT now(),
    expires_at        timestamptz,
    PRIMARY KEY (team_id, tool),
    CONSTRAINT team_rules_tighten CHECK (
        deny OR require_approval OR timeout_ms IS NOT NULL OR rate_per_minute IS NOT NULL)
);
CREATE TRIGGER team_rules_changed AFTER INSERT OR UPDATE OR DELETE ON team_rules
    FOR EACH ROW EXECUTE FUNCTION grants_notify();
