-- Workload profiles and gate sets. A spec is never edited: editing adds a
-- version. Runs and verdicts point at versions.

CREATE TABLE profiles (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    program_id bigint NOT NULL REFERENCES programs (id) ON DELETE CASCADE,
    name       text NOT NULL,
    created_by bigint REFERENCES users (id),
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX profiles_program_idx ON profiles (program_id);

CREATE TABLE profile_versions (
    id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    profile_id        bigint NOT NULL REFERENCES profiles (id) ON DELETE CASCADE,
    version           integer NOT NULL CHECK (version >= 1),
    spec              jsonb NOT NULL,
    digest            text NOT NULL,
    -- Versions with command steps may be added by program owners only.
    owner_only        boolean NOT NULL DEFAULT false,
    note              text NOT NULL DEFAULT '',
    created_by        bigint REFERENCES users (id),
    created_at        timestamptz NOT NULL DEFAULT now(),
    UNIQUE (profile_id, version)
);

CREATE TABLE gate_sets (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    program_id bigint NOT NULL REFERENCES programs (id) ON DELETE CASCADE,
    name       text NOT NULL,
    created_by bigint REFERENCES users (id),
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX gate_sets_program_idx ON gate_sets (program_id);

CREATE TABLE gate_set_versions (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    gate_set_id bigint NOT NULL REFERENCES gate_sets (id) ON DELETE CASCADE,
    version     integer NOT NULL CHECK (version >= 1),
    spec        jsonb NOT NULL,
    digest      text NOT NULL,
    owner_only  boolean NOT NULL DEFAULT false,
    note        text NOT NULL DEFAULT '',
    created_by  bigint REFERENCES users (id),
    created_at  timestamptz NOT NULL DEFAULT now(),
    UNIQUE (gate_set_id, version)
);

CREATE TRIGGER profile_versions_immutable BEFORE UPDATE ON profile_versions
    FOR EACH ROW EXECUTE FUNCTION refuse_change();
CREATE TRIGGER gate_set_versions_immutable BEFORE UPDATE ON gate_set_versions
    FOR EACH ROW EXECUTE FUNCTION refuse_change();
