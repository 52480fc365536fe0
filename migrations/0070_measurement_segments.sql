-- A measurement of more than 1,048,576 samples (stats.InMemoryLimit: a
-- run of ten million requests has ten million of each latency) keeps them
-- here rather than in values_f64, in segments of at most 1,048,576 values
-- grouped by log bucket (stats.Segment): a figure reads the one bucket
-- that holds its rank, a substring of data, instead of every sample.
-- measurements.segments is how many segments the row has (0: the samples
-- are in values_f64 as before).
ALTER TABLE measurements ADD COLUMN segments integer NOT NULL DEFAULT 0 CHECK (segments >= 0);

CREATE TABLE measurement_segments (
    measurement_id bigint NOT NULL REFERENCES measurements (id) ON DELETE CASCADE,
    segment        integer NOT NULL CHECK (segment >= 0),
    n              bigint NOT NULL CHECK (n > 0),
    -- the absolute log bucket of counts' second entry; counts are int64
    -- little-endian, one per bucket from the values <= 0 on
    lo             integer NOT NULL,
    counts         bytea NOT NULL,
    -- the values' compensated sum and sum of squared deviations, and the
    -- SHA-256 of the values in the order they were measured
    sum            double precision NOT NULL,
    m2             double precision NOT NULL,
    digest         bytea NOT NULL CHECK (length(digest) = 32),
    -- float64 little-endian, grouped by bucket
    data           bytea NOT NULL,
    PRIMARY KEY (measurement_id, segment)
);

-- Uncompressed and out of line, so that substring(data ...) fetches only
-- the pages it needs.
ALTER TABLE measurement_segments ALTER COLUMN data SET STORAGE EXTERNAL;
