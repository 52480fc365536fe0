-- Every check of a production watch, for the watch page's chart: when it
-- ran, the value (NULL when the query failed or had no data), the line in
-- force then, whether the value was past it, and the count of breaches in
-- a row after the check (the k-th triggers the stop-loss). Pruned after
-- 90 days.
CREATE TABLE rollout_watch_checks (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    watch_id   bigint NOT NULL REFERENCES rollout_watches (id) ON DELETE CASCADE,
    checked_at timestamptz NOT NULL,
    value      double precision,
    line       double precision NOT NULL,
    past_line  boolean NOT NULL,
    breaches   integer NOT NULL CHECK (breaches >= 0),
    triggered  boolean NOT NULL DEFAULT false,
    error      text NOT NULL DEFAULT '' CHECK (length(error) <= 2000),
    CHECK (NOT past_line OR value IS NOT NULL),
    CHECK (NOT triggered OR past_line)
);
CREATE INDEX rollout_watch_checks_watch_idx ON rollout_watch_checks (watch_id, checked_at);
CREATE INDEX rollout_watch_checks_age_idx ON rollout_watch_checks (checked_at);
