-- Every checkpoint of a program's decision log, kept for good: one signed
-- with each decision, and one each time the installation signs the head
-- again with its new key (after a key revocation), so that the log carries
-- on under a key that is still trusted. decision_chains.checkpoint stays
-- the latest; exports carry the earlier ones too.
CREATE TABLE decision_checkpoints (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    program_id bigint NOT NULL REFERENCES programs (id),
    seq        bigint NOT NULL CHECK (seq >= 0),
    head_hash  text NOT NULL,
    key_id     text NOT NULL,
    reason     text NOT NULL CHECK (reason IN ('decision', 'key_revoked')),
    envelope   jsonb NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX decision_checkpoints_program_idx ON decision_checkpoints (program_id, id);
CREATE TRIGGER decision_checkpoints_append_only BEFORE UPDATE OR DELETE ON decision_checkpoints
    FOR EACH ROW EXECUTE FUNCTION refuse_change();
CREATE TRIGGER decision_checkpoints_no_truncate BEFORE TRUNCATE ON decision_checkpoints
    FOR EACH STATEMENT EXECUTE FUNCTION refuse_change();

-- The checkpoints that exist now are the latest of each chain (earlier
-- ones were overwritten): they start the history.
INSERT INTO decision_checkpoints (program_id, seq, head_hash, key_id, reason, envelope, created_at)
SELECT program_id, head_seq, head_hash, coalesce(checkpoint->'signatures'->0->>'keyid', ''), 'decision', checkpoint, updated_at
FROM decision_chains WHERE checkpoint IS NOT NULL;
