-- 001_init: identities, API keys, nodes.
-- Applied by `sandboxctl migrate`, which records each file in
-- schema_migrations and refuses to run a file whose contents changed.

CREATE TABLE users (
    id          text PRIMARY KEY CHECK (id ~ '^[A-Za-z0-9._@-]{1,64}$'),
    role        text NOT NULL DEFAULT 'user' CHECK (role IN ('user', 'admin')),
    created_at  timestamptz NOT NULL DEFAULT now(),
    disabled_at timestamptz
);

-- Only the SHA-256 of a key is stored; the key itself is shown once.
CREATE TABLE api_keys (
    id           text PRIMARY KEY,
    user_id      text NOT NULL REFERENCES users(id),
    key_hash     text NOT NULL UNIQUE CHECK (key_hash ~ '^[0-9a-f]{64}$'),
    label        text NOT NULL DEFAULT '',
    created_at   timestamptz NOT NULL DEFAULT now(),
    last_used_at timestamptz,
    revoked_at   timestamptz
);
CREATE INDEX api_keys_user_idx ON api_keys (user_id);

-- One row per supervisor; heartbeat_at tells the api (readyz, /runtimes)
-- whether it is alive, runtimes what it can run.
CREATE TABLE nodes (
    node_id           text PRIMARY KEY,
    hostname          text NOT NULL,
    version           text NOT NULL,
    pid               integer NOT NULL,
    supervisor_socket text NOT NULL,
    started_at        timestamptz NOT NULL DEFAULT now(),
    heartbeat_at      timestamptz NOT NULL DEFAULT now(),
    runtimes          jsonb NOT NULL DEFAULT '{}'
);
CREATE INDEX nodes_heartbeat_idx ON nodes (heartbeat_at);
