-- Rollouts: a plan of ordered stages per program, the hash-chained log of
-- the decisions taken on it, production watches and webhooks.

-- A stage of a program's rollout plan. Its gates: a gate set version that
-- must pass on each of the stage's profiles.
CREATE TABLE rollout_stages (
    id                  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    program_id          bigint NOT NULL REFERENCES programs (id) ON DELETE CASCADE,
    position            integer NOT NULL CHECK (position >= 1),
    name                text NOT NULL CHECK (name ~ '^[A-Za-z0-9_-]{1,64}$'),
    description         text NOT NULL DEFAULT '',
    gate_set_version_id bigint NOT NULL REFERENCES gate_set_versions (id),
    created_by          bigint REFERENCES users (id),
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now(),
    UNIQUE (program_id, name),
    UNIQUE (program_id, position) DEFERRABLE INITIALLY DEFERRED
);

-- The profiles a stage's gate set must pass on. The evidence is the latest
-- run of the profile judged by the stage's gate set version, or run_id when
-- a run was chosen explicitly.
CREATE TABLE rollout_stage_profiles (
    stage_id   bigint NOT NULL REFERENCES rollout_stages (id) ON DELETE CASCADE,
    profile_id bigint NOT NULL REFERENCES profiles (id),
    run_id     bigint REFERENCES runs (id),
    PRIMARY KEY (stage_id, profile_id)
);

-- One decision chain per program. Appends lock this row (SELECT ... FOR
-- UPDATE), so that records are numbered and linked one at a time; the
-- checkpoint is the signed statement of the head.
CREATE TABLE decision_chains (
    program_id bigint PRIMARY KEY REFERENCES programs (id),
    chain      text NOT NULL,
    head_seq   bigint NOT NULL DEFAULT 0,
    head_hash  text NOT NULL,
    checkpoint jsonb,
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- The decision log. The signed columns (chain ... prev_hash) are the record
-- exactly as attest.Decision hashes and signs it; envelope is its DSSE
-- envelope. Nothing may change or remove a row: the trigger refuses, and
-- verification finds a row changed behind its back.
CREATE TABLE decisions (
    program_id    bigint NOT NULL REFERENCES programs (id),
    seq           bigint NOT NULL CHECK (seq >= 1),
    chain         text NOT NULL,
    kind          text NOT NULL,
    actor         text NOT NULL,
    organisation  text NOT NULL,
    at            timestamptz NOT NULL,
    stage         text NOT NULL,
    evidence      jsonb NOT NULL,
    reason        text NOT NULL,
    prev_hash     text NOT NULL,
    hash          text NOT NULL,
    envelope      jsonb NOT NULL,
    -- Not signed: links the record to the account for pages.
    actor_user_id bigint REFERENCES users (id),
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (program_id, seq)
);
CREATE TRIGGER decisions_append_only BEFORE UPDATE OR DELETE ON decisions
    FOR EACH ROW EXECUTE FUNCTION refuse_change();

-- A production watch of a stage: a query to a Prometheus-compatible API,
-- checked on a schedule while the stage is current; `consecutive` checks
-- past the line in a row trigger the stop-loss.
CREATE TABLE rollout_watches (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    program_id       bigint NOT NULL REFERENCES programs (id) ON DELETE CASCADE,
    stage_id         bigint NOT NULL UNIQUE REFERENCES rollout_stages (id) ON DELETE CASCADE,
    name             text NOT NULL CHECK (length(name) BETWEEN 1 AND 100),
    endpoint         text NOT NULL,
    query            text NOT NULL CHECK (length(query) BETWEEN 1 AND 4000),
    comparator       text NOT NULL CHECK (comparator IN ('<=', '>=')),
    line             double precision NOT NULL,
    unit             text NOT NULL DEFAULT '',
    consecutive      integer NOT NULL CHECK (consecutive BETWEEN 1 AND 100),
    interval_seconds integer NOT NULL CHECK (interval_seconds BETWEEN 5 AND 86400),
    -- The current run of breaches: how many, and their values and times.
    breaches         integer NOT NULL DEFAULT 0,
    recent           jsonb NOT NULL DEFAULT '[]',
    next_check_at    timestamptz NOT NULL DEFAULT now(),
    last_checked_at  timestamptz,
    last_value       double precision,
    last_error       text NOT NULL DEFAULT '',
    created_by       bigint REFERENCES users (id),
    created_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX rollout_watches_due_idx ON rollout_watches (next_check_at);

-- Webhooks: URLs called on rollout events, the body signed with HMAC-SHA256
-- under a per-webhook secret (sealed under the server's secret, shown once).
CREATE TABLE webhooks (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    program_id    bigint NOT NULL REFERENCES programs (id) ON DELETE CASCADE,
    url           text NOT NULL CHECK (length(url) BETWEEN 8 AND 2000),
    events        text[] NOT NULL,
    sealed_secret bytea,
    active        boolean NOT NULL DEFAULT true,
    created_by    bigint REFERENCES users (id),
    created_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhooks_program_idx ON webhooks (program_id);

-- One delivery of one event to one webhook, retried by its River job.
CREATE TABLE webhook_deliveries (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    webhook_id      bigint NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
    program_id      bigint NOT NULL REFERENCES programs (id) ON DELETE CASCADE,
    event           text NOT NULL,
    decision_seq    bigint,
    body            bytea NOT NULL,
    state           text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'delivered', 'failed')),
    attempts        integer NOT NULL DEFAULT 0,
    last_status     integer,
    last_error      text NOT NULL DEFAULT '',
    created_at      timestamptz NOT NULL DEFAULT now(),
    last_attempt_at timestamptz,
    delivered_at    timestamptz
);
CREATE INDEX webhook_deliveries_webhook_idx ON webhook_deliveries (webhook_id, id DESC);
