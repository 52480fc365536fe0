-- SSH signing keys that users register in Accord, and the co-signatures
-- accepted with them. A co-signature of a report is taken only from a
-- signed-in member of the program's other organisation, made with a key
-- that member registered beforehand; the row says who, of which
-- organisation, with which key. A removed key is kept (removed_at) so that
-- the co-signatures it made still name it.
CREATE TABLE user_ssh_keys (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    user_id     bigint NOT NULL REFERENCES users (id),
    name        text NOT NULL CHECK (length(name) BETWEEN 1 AND 100),
    public_key  text NOT NULL,
    fingerprint text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    removed_at  timestamptz
);
-- A key belongs to one account at a time.
CREATE UNIQUE INDEX user_ssh_keys_fingerprint_key ON user_ssh_keys (fingerprint) WHERE removed_at IS NULL;
CREATE INDEX user_ssh_keys_user_idx ON user_ssh_keys (user_id);

CREATE TABLE report_cosignatures (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id          bigint NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    report_version  integer NOT NULL,
    user_id         bigint NOT NULL REFERENCES users (id),
    organization_id bigint NOT NULL REFERENCES organizations (id),
    ssh_key_id      bigint NOT NULL REFERENCES user_ssh_keys (id),
    fingerprint     text NOT NULL,
    file_name       text NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    UNIQUE (run_id, user_id)
);
CREATE TRIGGER report_cosignatures_immutable BEFORE UPDATE OR DELETE ON report_cosignatures
    FOR EACH ROW EXECUTE FUNCTION refuse_change();
CREATE TRIGGER report_cosignatures_no_truncate BEFORE TRUNCATE ON report_cosignatures
    FOR EACH STATEMENT EXECUTE FUNCTION refuse_change();
