-- A share of requests (the error rate) keeps how many requests it was
-- taken over, so that a gate can bound a share that did not vary between
-- repetitions by the binomial sampling of those requests. NULL: unknown
-- (older measurements, and every other metric).

ALTER TABLE measurements ADD COLUMN trials bigint CHECK (trials > 0);
