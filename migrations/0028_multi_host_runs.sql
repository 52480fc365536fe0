-- Runs across several lab hosts. A multi-host run keeps runs.host_id as
-- its first host (lists show it) and names every host, with its role, in
-- run_hosts; each host has its own run folder, event stream and probe.
-- The run holds every host's lease together (store.AcquireLeases), and
-- its launch window (runs.launch_intent_at, probe_ended_at) covers all of
-- them: until every probe is seen to end, no host of the run is another
-- run's.
CREATE TABLE run_hosts (
    run_id         bigint NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    -- The host's place in the run: roles in the profile's order, hosts of
    -- a role as the request named them.
    ordinal        integer NOT NULL CHECK (ordinal >= 0),
    role           text NOT NULL,
    host_id        bigint NOT NULL REFERENCES hosts (id),
    remote_dir     text NOT NULL DEFAULT '',
    launched       boolean NOT NULL DEFAULT false,
    events_offset  bigint NOT NULL DEFAULT 0,
    progress       jsonb,
    -- What the host is doing, as its probe's events and the worker say.
    state          text NOT NULL DEFAULT 'queued',
    reason         text NOT NULL DEFAULT '',
    -- The barrier its probe waits at (-1: none), as its persisted events
    -- say: a worker that takes the run over releases it from there.
    waiting_at     integer NOT NULL DEFAULT -1,
    probe_ended_at timestamptz,
    PRIMARY KEY (run_id, ordinal),
    UNIQUE (run_id, host_id)
);
CREATE INDEX run_hosts_host_idx ON run_hosts (host_id);

-- Events come from several probes: each host's sequence is its own.
ALTER TABLE run_events ADD COLUMN host_ordinal integer;
ALTER TABLE run_events DROP CONSTRAINT run_events_run_id_seq_key;
CREATE UNIQUE INDEX run_events_run_host_seq_key ON run_events (run_id, coalesce(host_ordinal, -1), seq);

-- Each host's measurements beside the run's combined ones (host '').
ALTER TABLE measurements ADD COLUMN host text NOT NULL DEFAULT '';
ALTER TABLE measurements DROP CONSTRAINT measurements_run_id_metric_step_level_repetition_key;
ALTER TABLE measurements ADD CONSTRAINT measurements_series_key UNIQUE (run_id, metric, step, level, repetition, host);
