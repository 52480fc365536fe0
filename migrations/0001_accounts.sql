-- Accounts, organisations, joint programs, sessions, API tokens, audit log.

CREATE TABLE organizations (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name       text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    kind       text NOT NULL CHECK (kind IN ('vendor', 'customer')),
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX organizations_name_key ON organizations (lower(name));

CREATE TABLE users (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    email           text NOT NULL CHECK (length(email) BETWEEN 3 AND 320),
    display_name    text NOT NULL CHECK (length(display_name) BETWEEN 1 AND 200),
    password_hash   text NOT NULL,
    organization_id bigint REFERENCES organizations (id),
    is_admin        boolean NOT NULL DEFAULT false,
    disabled        boolean NOT NULL DEFAULT false,
    created_at      timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX users_email_key ON users (lower(email));

-- A joint test program joins one vendor and one customer organisation.
CREATE TABLE programs (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name            text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    description     text NOT NULL DEFAULT '',
    vendor_org_id   bigint NOT NULL REFERENCES organizations (id),
    customer_org_id bigint NOT NULL REFERENCES organizations (id),
    created_by      bigint REFERENCES users (id),
    created_at      timestamptz NOT NULL DEFAULT now(),
    CHECK (vendor_org_id <> customer_org_id)
);

CREATE TABLE program_members (
    program_id bigint NOT NULL REFERENCES programs (id) ON DELETE CASCADE,
    user_id    bigint NOT NULL REFERENCES users (id),
    role       text NOT NULL CHECK (role IN ('viewer', 'engineer', 'approver', 'owner')),
    added_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (program_id, user_id)
);
CREATE INDEX program_members_user_idx ON program_members (user_id);

-- Sessions are checked on every request, so sign-out and revocation take
-- effect at once even though the cookie is a signed JWT.
CREATE TABLE sessions (
    id          text PRIMARY KEY,
    user_id     bigint NOT NULL REFERENCES users (id),
    created_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL,
    revoked_at  timestamptz,
    client_addr text NOT NULL DEFAULT '',
    user_agent  text NOT NULL DEFAULT ''
);
CREATE INDEX sessions_user_idx ON sessions (user_id);

CREATE TABLE api_tokens (
    id           text PRIMARY KEY,
    user_id      bigint NOT NULL REFERENCES users (id),
    name         text NOT NULL CHECK (length(name) BETWEEN 1 AND 100),
    scopes       text[] NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz NOT NULL,
    revoked_at   timestamptz,
    last_used_at timestamptz
);
CREATE INDEX api_tokens_user_idx ON api_tokens (user_id);

-- Sign-in attempts, for throttling per account and per client address.
CREATE TABLE signin_attempts (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at          timestamptz NOT NULL DEFAULT now(),
    email       text NOT NULL,
    client_addr text NOT NULL,
    succeeded   boolean NOT NULL
);
CREATE INDEX signin_attempts_email_idx ON signin_attempts (lower(email), at);
CREATE INDEX signin_attempts_addr_idx ON signin_attempts (client_addr, at);

-- The audit log is append-only: the trigger refuses updates and deletes.
CREATE TABLE audit_log (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at            timestamptz NOT NULL DEFAULT now(),
    actor_user_id bigint REFERENCES users (id),
    actor_label   text NOT NULL,
    action        text NOT NULL,
    program_id    bigint REFERENCES programs (id),
    target        text NOT NULL DEFAULT '',
    details       jsonb NOT NULL DEFAULT '{}',
    client_addr   text NOT NULL DEFAULT ''
);
CREATE INDEX audit_log_program_idx ON audit_log (program_id, at DESC);

CREATE FUNCTION refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '% is append-only', TG_TABLE_NAME;
END;
$$;

CREATE TRIGGER audit_log_append_only BEFORE UPDATE OR DELETE ON audit_log
    FOR EACH ROW EXECUTE FUNCTION refuse_change();
