-- The decision's whole output beside its input (allow, require_approval, reasons,
-- obligations, error_code): the decision log shows what the policy answered, not only the
-- result. NULL for decisions logged before.
ALTER TABLE decisions ADD COLUMN output jsonb;
