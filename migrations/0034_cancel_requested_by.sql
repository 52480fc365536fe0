-- Who asked for a run's cancel (an email, as the audit log names them), so
-- that the run's reason says who cancelled it when the worker, a stop job
-- or the reconciler carries the cancel out, not just "a user".
ALTER TABLE runs ADD COLUMN cancel_requested_by text NOT NULL DEFAULT '';
