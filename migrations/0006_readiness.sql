-- The integration plan: per program, the joint teams' sequence of
-- integration steps (baseline measurements, network preparation, storage
-- provisioning, host setup, GPU-path validation, orchestration, QoS and
-- isolation), each with an owner from either organisation, a status, the
-- readiness checks and runs that count as its evidence, and a sign-off by
-- each side. Every change is also written to the audit log.

CREATE TABLE plan_steps (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    program_id    bigint NOT NULL REFERENCES programs (id) ON DELETE CASCADE,
    -- The step's kind from the seeded sequence (baseline, network, ...).
    kind          text NOT NULL CHECK (kind ~ '^[a-z][a-z0-9-]{0,39}$'),
    position      integer NOT NULL,
    title         text NOT NULL CHECK (length(title) BETWEEN 1 AND 200),
    description   text NOT NULL DEFAULT '',
    owner_user_id bigint REFERENCES users (id),
    status        text NOT NULL DEFAULT 'not_started' CHECK (status IN ('not_started', 'in_progress', 'done', 'blocked')),
    note          text NOT NULL DEFAULT '' CHECK (length(note) <= 4000),
    updated_by    bigint REFERENCES users (id),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    UNIQUE (program_id, kind)
);
CREATE INDEX plan_steps_program_idx ON plan_steps (program_id, position);

-- Readiness checks (by check id, e.g. network.mtu) whose results across the
-- program's hosts count as the step's evidence.
CREATE TABLE plan_step_checks (
    step_id  bigint NOT NULL REFERENCES plan_steps (id) ON DELETE CASCADE,
    check_id text NOT NULL CHECK (check_id ~ '^[a-z][a-z0-9.-]{0,79}$'),
    PRIMARY KEY (step_id, check_id)
);

-- Runs that prove the step.
CREATE TABLE plan_step_runs (
    step_id bigint NOT NULL REFERENCES plan_steps (id) ON DELETE CASCADE,
    run_id  bigint NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    PRIMARY KEY (step_id, run_id)
);
CREATE INDEX plan_step_runs_run_idx ON plan_step_runs (run_id);

-- The current sign-off of each side (the program's vendor or customer
-- organisation). Reopening a step withdraws them; the audit log keeps
-- every sign-off and withdrawal.
CREATE TABLE plan_signoffs (
    step_id   bigint NOT NULL REFERENCES plan_steps (id) ON DELETE CASCADE,
    side      text NOT NULL CHECK (side IN ('vendor', 'customer')),
    user_id   bigint NOT NULL REFERENCES users (id),
    signed_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (step_id, side)
);
