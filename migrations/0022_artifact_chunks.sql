-- Artifacts are kept in chunks instead of one bytea: a bytea holds less
-- than 1 GiB and is read and written whole, while a collected run file may
-- be 2 GiB and must stream. Each artifact's content is its chunks in seq
-- order, all of chunk_size bytes but the last; blob_id names them, because
-- chunks are written before the content's SHA-256 (the artifact's key) is
-- known. Plain rows rather than large objects: they replicate, dump and
-- restore like every other table, go with their artifact, and each chunk
-- is read by a short query of its own (no transaction held open while a
-- download streams).

CREATE SEQUENCE artifact_blob_id;

ALTER TABLE artifacts
    ADD COLUMN blob_id    bigint,
    ADD COLUMN chunk_size integer;

CREATE TABLE artifact_chunks (
    blob_id bigint NOT NULL,
    seq     integer NOT NULL CHECK (seq >= 0),
    data    bytea NOT NULL CHECK (length(data) >= 1),
    PRIMARY KEY (blob_id, seq)
);

-- The artifacts stored so far move into chunks of 1 MiB.
UPDATE artifacts SET blob_id = nextval('artifact_blob_id'), chunk_size = 1048576, size = octet_length(content);
INSERT INTO artifact_chunks (blob_id, seq, data)
    SELECT a.blob_id, s.seq, substring(a.content FROM s.seq * 1048576 + 1 FOR 1048576)
    FROM artifacts a, generate_series(0, (octet_length(a.content) - 1) / 1048576) AS s(seq)
    WHERE octet_length(a.content) > 0;

ALTER TABLE artifacts
    DROP COLUMN content,
    ALTER COLUMN blob_id SET NOT NULL,
    ALTER COLUMN chunk_size SET NOT NULL,
    ADD CONSTRAINT artifacts_chunk_size_check CHECK (chunk_size > 0),
    ADD CONSTRAINT artifacts_size_check CHECK (size >= 0),
    ADD CONSTRAINT artifacts_blob_id_key UNIQUE (blob_id);

-- Every chunk belongs to an artifact by the time its transaction commits
-- (a write adds the artifact's row after its last chunk), and goes with it.
ALTER TABLE artifact_chunks ADD CONSTRAINT artifact_chunks_blob_id_fkey
    FOREIGN KEY (blob_id) REFERENCES artifacts (blob_id) ON DELETE CASCADE DEFERRABLE INITIALLY DEFERRED;
