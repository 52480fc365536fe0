-- A pipeline names each run request with an Idempotency-Key, so that
-- sending the request again (its answer was lost) gives back the run it
-- started instead of starting another. A key belongs to the user who sent
-- it, within the program; the request's digest is kept so that a key used
-- again for a different request is refused rather than answered wrongly.

ALTER TABLE runs
    ADD COLUMN idempotency_key text CHECK (length(idempotency_key) BETWEEN 1 AND 200),
    ADD COLUMN request_digest  text;

CREATE UNIQUE INDEX runs_idempotency_key ON runs (program_id, created_by, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
