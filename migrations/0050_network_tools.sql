-- Network tools: browser.full's per-team egress allowlists and external_api.call's registered
-- APIs (their secrets encrypted at rest, or named files read at call time). Both are read by
-- the services on every call, so a change applies to the next call on every instance.

CREATE TABLE egress_allowlists (
    team_id     text PRIMARY KEY,
    hosts       text[] NOT NULL,           -- host[:port] patterns, validated by the route
    updated_by  text NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT egress_hosts_bounded CHECK (cardinality(hosts) <= 200)
);

CREATE TABLE external_apis (
    name           text PRIMARY KEY,
    base_url       text NOT NULL,
    methods        text[] NOT NULL,
    paths          text[] NOT NULL,
    secret_header  text NOT NULL,
    secret_sealed  bytea,                  -- AES-256-GCM: nonce || ciphertext, bound to the name
    secret_key_id  text,                   -- which key sealed it (a hash prefix, not the key)
    secret_file    text,                   -- a file name under the secret directory
    created_by     text NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT external_apis_name CHECK (name ~ '^[a-z][a-z0-9_-]{0,63}$'),
    CONSTRAINT external_apis_one_secret CHECK ((secret_sealed IS NULL) <> (secret_file IS NULL)),
    CONSTRAINT external_apis_sealed_key CHECK ((secret_sealed IS NULL) = (secret_key_id IS NULL))
);
