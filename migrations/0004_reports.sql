-- Signed results: the in-toto statements of each evaluated run, and its
-- report bundles. A bundle is made once, when the run is signed, and kept
-- as an artifact, so that every download is the same signed bytes and a
-- co-signature stays valid; co-signing adds a new version of the bundle.

CREATE TABLE run_attestations (
    run_id         bigint NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    name           text NOT NULL,
    predicate_type text NOT NULL,
    key_id         text NOT NULL,
    envelope       jsonb NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, name)
);

CREATE TABLE run_reports (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id          bigint NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    version         integer NOT NULL,
    bundle_sha256   text NOT NULL REFERENCES artifacts (sha256),
    size            bigint NOT NULL,
    manifest_sha256 text NOT NULL,
    key_id          text NOT NULL,
    cosigners       text[] NOT NULL DEFAULT '{}',
    created_by      bigint REFERENCES users (id),
    created_at      timestamptz NOT NULL DEFAULT now(),
    UNIQUE (run_id, version)
);
CREATE TRIGGER run_reports_immutable BEFORE UPDATE OR DELETE ON run_reports
    FOR EACH ROW EXECUTE FUNCTION refuse_change();
