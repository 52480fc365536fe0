-- Lab hosts, host leases, runs with their events, artifacts and results.

CREATE TABLE hosts (
    id                 bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    program_id         bigint NOT NULL REFERENCES programs (id) ON DELETE CASCADE,
    name               text NOT NULL CHECK (length(name) BETWEEN 1 AND 100),
    address            text NOT NULL,
    port               integer NOT NULL CHECK (port BETWEEN 1 AND 65535),
    username           text NOT NULL,
    labels             jsonb NOT NULL DEFAULT '{}',
    -- ProxyJump chain: [{address, port, username, host_key}], first hop first.
    jump_chain         jsonb NOT NULL DEFAULT '[]',
    auth_method        text NOT NULL CHECK (auth_method IN ('key', 'agent')),
    public_key         text NOT NULL DEFAULT '',
    sealed_private_key bytea,
    agent_socket       text NOT NULL DEFAULT '',
    -- The pinned host key (authorized_keys form); empty until confirmed.
    host_key           text NOT NULL DEFAULT '',
    host_key_sha256    text NOT NULL DEFAULT '',
    host_key_pinned_at timestamptz,
    allow_destructive  boolean NOT NULL DEFAULT false,
    emulated           boolean NOT NULL DEFAULT false,
    last_check_at      timestamptz,
    last_check_ok      boolean,
    last_check_message text NOT NULL DEFAULT '',
    last_rtt_ms        double precision,
    created_by         bigint REFERENCES users (id),
    created_at         timestamptz NOT NULL DEFAULT now(),
    UNIQUE (program_id, name)
);

-- Facts taken by `accord probe facts`, kept as history for drift.
CREATE TABLE host_facts (
    id       bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    host_id  bigint NOT NULL REFERENCES hosts (id) ON DELETE CASCADE,
    run_id   bigint,
    taken_at timestamptz NOT NULL DEFAULT now(),
    facts    jsonb NOT NULL,
    digest   text NOT NULL
);
CREATE INDEX host_facts_host_idx ON host_facts (host_id, taken_at DESC);

-- One run per host at a time. The fencing token grows with every
-- acquisition, so a worker whose lease was taken over cannot write.
CREATE SEQUENCE host_lease_token;
CREATE TABLE host_leases (
    host_id     bigint PRIMARY KEY REFERENCES hosts (id) ON DELETE CASCADE,
    run_id      bigint NOT NULL,
    token       bigint NOT NULL,
    holder      text NOT NULL,
    acquired_at timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL
);

CREATE TABLE runs (
    id                  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    program_id          bigint NOT NULL REFERENCES programs (id) ON DELETE CASCADE,
    kind                text NOT NULL DEFAULT 'executed' CHECK (kind IN ('executed', 'imported')),
    profile_version_id  bigint REFERENCES profile_versions (id),
    gate_set_version_id bigint REFERENCES gate_set_versions (id),
    host_id             bigint REFERENCES hosts (id),
    baseline_run_id     bigint REFERENCES runs (id),
    state               text NOT NULL CHECK (state IN ('queued', 'waiting_for_host', 'preparing', 'running', 'collecting',
                                                        'evaluating', 'done', 'failed', 'cancelled')),
    reason              text NOT NULL DEFAULT '',
    label               text NOT NULL DEFAULT '',
    emulated            boolean NOT NULL DEFAULT false,
    -- The attempt whose measurement was launched on the host (0: none yet).
    -- A run is never launched twice for one attempt.
    attempt             integer NOT NULL DEFAULT 0,
    launched            boolean NOT NULL DEFAULT false,
    remote_dir          text NOT NULL DEFAULT '',
    events_offset       bigint NOT NULL DEFAULT 0,
    progress            jsonb,
    verdict             text CHECK (verdict IN ('PASS', 'FAIL', 'INCONCLUSIVE', 'INCOMPARABLE')),
    readiness_override  jsonb,
    cancel_requested_at timestamptz,
    -- The stop-loss breach that aborted the run, with its numbers.
    stop_loss           jsonb,
    river_job_id        bigint,
    created_by          bigint REFERENCES users (id),
    created_at          timestamptz NOT NULL DEFAULT now(),
    started_at          timestamptz,
    finished_at         timestamptz,
    state_changed_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX runs_program_idx ON runs (program_id, id DESC);
CREATE INDEX runs_host_idx ON runs (host_id, id DESC);

ALTER TABLE host_facts ADD CONSTRAINT host_facts_run_fk FOREIGN KEY (run_id) REFERENCES runs (id) ON DELETE SET NULL;

-- Every state a run passed through, with its time and reason.
CREATE TABLE run_transitions (
    run_id     bigint NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    at         timestamptz NOT NULL DEFAULT clock_timestamp(),
    from_state text NOT NULL,
    to_state   text NOT NULL,
    reason     text NOT NULL DEFAULT ''
);
CREATE INDEX run_transitions_run_idx ON run_transitions (run_id, at);

-- Log lines and progress from the probe (seq: the probe's own sequence
-- number, so that a resumed follow stores nothing twice) and the server's
-- own notes (seq NULL). id orders them and is the live pages' cursor.
CREATE TABLE run_events (
    id      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id  bigint NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    seq     bigint,
    at      timestamptz NOT NULL,
    type    text NOT NULL,
    level   text NOT NULL DEFAULT 'info',
    message text NOT NULL DEFAULT '',
    data    jsonb,
    UNIQUE (run_id, seq)
);
CREATE INDEX run_events_run_idx ON run_events (run_id, id);

-- Content-addressed artifact store: each blob once, by SHA-256.
CREATE TABLE artifacts (
    sha256     text PRIMARY KEY CHECK (sha256 ~ '^[0-9a-f]{64}$'),
    size       bigint NOT NULL,
    content    bytea NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE run_artifacts (
    run_id bigint NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    path   text NOT NULL,
    sha256 text NOT NULL REFERENCES artifacts (sha256),
    size   bigint NOT NULL,
    PRIMARY KEY (run_id, path)
);

-- Canonical measurements: one row per metric × step × level × repetition.
-- values_f64 holds raw samples as little-endian float64 (or histogram bucket
-- values when counts is set); summary holds the precomputed percentiles.
CREATE TABLE measurements (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id       bigint NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    metric       text NOT NULL,
    step         text NOT NULL,
    level        text NOT NULL DEFAULT '',
    repetition   integer NOT NULL,
    n            bigint NOT NULL,
    values_f64   bytea NOT NULL,
    counts       bytea,
    tool_summary jsonb NOT NULL DEFAULT '{}',
    source       jsonb NOT NULL,
    summary      jsonb NOT NULL,
    UNIQUE (run_id, metric, step, level, repetition)
);

-- Precomputed chart data (downsampled series, CDFs), so pages do not
-- recompute per view.
CREATE TABLE run_charts (
    run_id bigint NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    key    text NOT NULL,
    data   jsonb NOT NULL,
    PRIMARY KEY (run_id, key)
);

CREATE TABLE evaluations (
    id                  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id              bigint NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    baseline_run_id     bigint REFERENCES runs (id),
    gate_set_version_id bigint NOT NULL REFERENCES gate_set_versions (id),
    overall             text NOT NULL,
    result              jsonb NOT NULL,
    canonical           bytea NOT NULL,
    digest              text NOT NULL,
    engine_version      text NOT NULL,
    created_at          timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX evaluations_run_idx ON evaluations (run_id, id DESC);
CREATE TRIGGER evaluations_immutable BEFORE UPDATE ON evaluations
    FOR EACH ROW EXECUTE FUNCTION refuse_change();
