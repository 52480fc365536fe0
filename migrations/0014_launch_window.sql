-- The launch window. A run's probe may be measuring on its host from the
-- moment a worker is about to launch it until the probe is known to have
-- ended, whatever the database says about the launch itself: a crash, or a
-- lost answer of `probe launch`, leaves a probe running that was never
-- recorded as launched. So the worker records its intent (and the run
-- folder) before it launches, and the host stays the run's until:
--   probe_ended_at: the probe's end was seen (its status read, its
--     processes found gone, or a stop confirmed that nothing is left);
--   or, for a run that ended without seeing it (its host unreachable),
--   probe_deadline: by then the probe's own time limit has ended it.
ALTER TABLE runs
    ADD COLUMN launch_intent_at timestamptz,
    ADD COLUMN probe_ended_at   timestamptz,
    ADD COLUMN probe_deadline   timestamptz;

-- Runs launched before this migration: their intent is their launch, and
-- a run past collecting has seen its probe end.
UPDATE runs SET launch_intent_at = coalesce(started_at, created_at), probe_deadline = now() + interval '1 day' WHERE launched;
UPDATE runs SET probe_ended_at = coalesce(finished_at, state_changed_at)
    WHERE launched AND state IN ('evaluating', 'done', 'failed', 'cancelled');

-- The runs that may have a probe on their host: few at any time, asked
-- for every lease acquisition.
CREATE INDEX runs_probe_may_run_idx ON runs (host_id)
    WHERE launch_intent_at IS NOT NULL AND probe_ended_at IS NULL;
