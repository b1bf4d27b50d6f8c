-- 002_runs: the image catalog, runs (which are the queue) and
-- idempotency keys.

-- Root filesystems the supervisors found in SANDBOX_IMAGES_DIR, with the
-- digest of their tarball. Requests name an image or one of its aliases.
CREATE TABLE images (
    name        text PRIMARY KEY CHECK (name ~ '^[a-z0-9][a-z0-9._-]{0,63}$'),
    digest      text NOT NULL CHECK (digest ~ '^sha256:[0-9a-f]{64}$'),
    packages    text NOT NULL DEFAULT '',
    size_bytes  bigint NOT NULL DEFAULT 0,
    node_id     text NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE runs (
    id                  uuid PRIMARY KEY,
    user_id             text NOT NULL REFERENCES users(id),
    session_id          uuid,
    spec_version        text NOT NULL,
    runtime             text NOT NULL,
    runtime_version     text,
    base_image          text NOT NULL,
    image               text NOT NULL,
    image_digest        text,
    command             jsonb NOT NULL,
    env                 jsonb NOT NULL DEFAULT '{}',
    files               jsonb,
    capture_patterns    jsonb NOT NULL DEFAULT '[]',
    network_policy      text NOT NULL DEFAULT 'deny_all',
    cpu                 double precision NOT NULL,
    memory_mb           integer NOT NULL,
    pids_limit          integer NOT NULL,
    nofile              integer NOT NULL,
    nproc               integer NOT NULL,
    timeout_sec         integer NOT NULL,
    startup_timeout_sec integer NOT NULL,
    phase               text NOT NULL DEFAULT 'queued' CHECK (phase IN
                        ('queued', 'starting', 'running', 'completed', 'failed',
                         'timed_out', 'killed')),
    reason_code         text,
    message             text,
    exit_code           integer,
    policy_hash         text NOT NULL,
    request_id          text,
    source              text,
    created_at          timestamptz NOT NULL DEFAULT now(),
    started_at          timestamptz,  -- claimed: provisioning begins
    running_at          timestamptz,  -- the command began
    finished_at         timestamptz,
    node_id             text,
    lease_until         timestamptz,
    attempt             integer NOT NULL DEFAULT 0,
    cancel_requested_at timestamptz,
    log_bytes           bigint NOT NULL DEFAULT 0,
    artifact_bytes      bigint NOT NULL DEFAULT 0,
    resource_usage      jsonb
);
-- The queue: oldest queued first.
CREATE INDEX runs_queued_idx ON runs (created_at) WHERE phase = 'queued';
-- Active runs per node (leases, recovery) and per user (fairness).
CREATE INDEX runs_active_node_idx ON runs (node_id) WHERE phase IN ('starting', 'running');
CREATE INDEX runs_active_user_idx ON runs (user_id) WHERE phase IN ('starting', 'running');
CREATE INDEX runs_user_created_idx ON runs (user_id, created_at DESC);

-- A new run wakes the supervisors; a cancel request wakes its owner.
CREATE FUNCTION runs_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM pg_notify('sandbox_runs', NEW.id::text);
    ELSIF NEW.cancel_requested_at IS NOT NULL AND OLD.cancel_requested_at IS NULL THEN
        PERFORM pg_notify('sandbox_cancel', NEW.id::text);
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER runs_notify_insert AFTER INSERT ON runs
    FOR EACH ROW EXECUTE FUNCTION runs_notify();
CREATE TRIGGER runs_notify_cancel AFTER UPDATE OF cancel_requested_at ON runs
    FOR EACH ROW EXECUTE FUNCTION runs_notify();

-- Idempotency-Key rows, scoped per endpoint and user. The row is
-- inserted first, in the same transaction as the object it stands for, so
-- concurrent duplicates wait on the key and then replay it.
CREATE TABLE idempotency (
    endpoint     text NOT NULL,
    user_id      text NOT NULL,
    key          text NOT NULL CHECK (length(key) BETWEEN 1 AND 128),
    fingerprint  text NOT NULL,
    object_id    uuid NOT NULL,
    status       integer,
    response     jsonb,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (endpoint, user_id, key)
);
CREATE INDEX idempotency_created_idx ON idempotency (created_at);
