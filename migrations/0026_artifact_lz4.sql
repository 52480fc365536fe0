-- Raw outputs are written and read back whole by the ingest (ten million
-- requests' records are 2.3 GB). PostgreSQL's default pglz compressed a
-- run's JSON lines at 18 MB/s and read them back at 290 MB/s on the
-- development machine; lz4 wrote them at 150 MB/s and read them at
-- 1 GB/s (a quarter larger on disk). New chunks are compressed with lz4
-- where the server has it; chunks already stored stay as they are.
DO $$
BEGIN
    ALTER TABLE artifact_chunks ALTER COLUMN data SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported THEN
    RAISE NOTICE 'this PostgreSQL has no lz4: artifact chunks stay compressed with pglz';
END
$$;

-- Samples are float64s, which do not compress: they are stored out of line
-- without trying to.
ALTER TABLE measurements ALTER COLUMN values_f64 SET STORAGE EXTERNAL;
