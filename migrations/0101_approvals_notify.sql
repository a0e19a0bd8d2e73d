-- Open consoles follow the approvals inbox live: every change of an approval (held, decided,
-- expired, claimed, cancelled) notifies its team on one channel, from whichever replica or
-- command made it. Notifications are sent at commit; identical ones in one transaction fold.
CREATE FUNCTION approvals_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('toolproxy_approvals', NEW.team_id);
    RETURN NULL;
END $$;
CREATE TRIGGER approvals_changed AFTER INSERT OR UPDATE ON approvals
    FOR EACH ROW EXECUTE FUNCTION approvals_notify();
