-- Other Accord runs seen active on a run's host while it measured. The
-- lease keeps one run of an installation per host, but two installations
-- (or a lease bypassed by a bug) can still put two probes on one host:
-- each probe records the other run folders it finds active, and a run with
-- any such neighbour is contaminated, never judged PASS.
CREATE TABLE run_neighbours (
    run_id       bigint NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    -- The other run's folder on the host, and its run when it belongs to
    -- this installation.
    other_dir    text NOT NULL,
    other_run_id bigint REFERENCES runs (id) ON DELETE SET NULL,
    other_pid    integer,
    -- Whose probe saw it: this run's own ('this run'), or the other run's,
    -- which saw this run's folder active ('the other run').
    seen_by      text NOT NULL CHECK (seen_by IN ('this run', 'the other run')),
    first_seen   timestamptz NOT NULL,
    last_seen    timestamptz NOT NULL,
    PRIMARY KEY (run_id, other_dir, seen_by)
);
