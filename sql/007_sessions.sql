-- 007: sessions (a workspace plus an image and limits, with a TTL) and
-- the artifacts captured from runs.
--
-- A session's life: provisioning (the row exists; a supervisor claims it
-- and mounts its workspace tmpfs) → ready → expired | deleted, or failed
-- when no supervisor could provision it. `node_id` is the supervisor that
-- holds the workspace; runs of the session go to that node only.

CREATE TABLE sessions (
    id                  uuid PRIMARY KEY,
    user_id             text NOT NULL REFERENCES users(id),
    thread_id           text CHECK (thread_id IS NULL OR length(thread_id) BETWEEN 1 AND 256),
    spec_version        text NOT NULL,
    runtime             text NOT NULL,
    base_image          text NOT NULL,
    image               text NOT NULL,
    image_digest        text,
    cpu                 double precision NOT NULL,
    memory_mb           integer NOT NULL,
    pids_limit          integer NOT NULL,
    timeout_sec         integer NOT NULL,
    startup_timeout_sec integer NOT NULL,
    network_policy      text NOT NULL DEFAULT 'deny_all',
    env                 jsonb NOT NULL DEFAULT '{}',
    labels              jsonb NOT NULL DEFAULT '{}',
    policy_hash         text NOT NULL,
    ttl_sec             integer NOT NULL CHECK (ttl_sec > 0),
    state               text NOT NULL DEFAULT 'provisioning' CHECK (state IN
                        ('provisioning', 'ready', 'expired', 'deleted', 'failed')),
    reason              text,
    node_id             text,
    request_id          text,
    source              text,
    created_at          timestamptz NOT NULL DEFAULT now(),
    last_activity_at    timestamptz NOT NULL DEFAULT now(),
    expires_at          timestamptz NOT NULL,
    max_expires_at      timestamptz NOT NULL,
    ended_at            timestamptz,
    workspace_freed_at  timestamptz
);
-- get-or-create by thread: one live session per user and thread.
CREATE UNIQUE INDEX sessions_thread_idx ON sessions (user_id, thread_id)
    WHERE thread_id IS NOT NULL AND state IN ('provisioning', 'ready');
CREATE INDEX sessions_user_created_idx ON sessions (user_id, created_at DESC);
-- The sweeper: live sessions by expiry; ended ones whose workspace is
-- still mounted.
CREATE INDEX sessions_live_expiry_idx ON sessions (expires_at)
    WHERE state IN ('provisioning', 'ready');
CREATE INDEX sessions_unfreed_idx ON sessions (node_id)
    WHERE state IN ('expired', 'deleted', 'failed') AND workspace_freed_at IS NULL;
CREATE INDEX runs_session_idx ON runs (session_id, created_at) WHERE session_id IS NOT NULL;

-- A new session wakes the supervisors (to provision it); an ended one
-- wakes its node (to stop its runs and free its workspace).
CREATE FUNCTION sessions_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' OR NEW.state IS DISTINCT FROM OLD.state THEN
        PERFORM pg_notify('sandbox_sessions', NEW.id::text);
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER sessions_notify AFTER INSERT OR UPDATE OF state ON sessions
    FOR EACH ROW EXECUTE FUNCTION sessions_notify();

-- Audit: sandbox.session.created, and how a session ended.
CREATE FUNCTION audit_session() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    e text;
BEGIN
    IF TG_OP = 'INSERT' THEN
        e := 'sandbox.session.created';
    ELSIF NEW.state IS DISTINCT FROM OLD.state AND NEW.state <> 'ready' THEN
        e := 'sandbox.session.' || NEW.state;
    ELSE
        RETURN NULL;
    END IF;
    INSERT INTO audit_events (event, user_id, source, session_id, runtime, base_image,
        image_digest, policy_hash, spec_version, request_id, node_id, outcome)
    VALUES (e, NEW.user_id, NEW.source, NEW.id, NEW.runtime, NEW.base_image,
        NEW.image_digest, NEW.policy_hash, NEW.spec_version, NEW.request_id, NEW.node_id,
        jsonb_build_object('state', NEW.state, 'reason', NEW.reason,
                           'expires_at', NEW.expires_at));
    RETURN NULL;
END $$;
CREATE TRIGGER sessions_audit AFTER INSERT OR UPDATE OF state ON sessions
    FOR EACH ROW EXECUTE FUNCTION audit_session();
CREATE INDEX audit_session_idx ON audit_events (session_id, id) WHERE session_id IS NOT NULL;

-- Files captured from a run's workspace (capture_patterns). Symlinks are
-- recorded as metadata only (size 0, their target), never followed.
CREATE TABLE artifacts (
    run_id       uuid NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    path         text NOT NULL CHECK (length(path) BETWEEN 1 AND 1024),
    type         text NOT NULL CHECK (type IN ('file', 'symlink')),
    size         bigint NOT NULL DEFAULT 0,
    target       text,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, path)
);
ALTER TABLE runs
    ADD COLUMN artifacts_truncated boolean NOT NULL DEFAULT false,
    ADD COLUMN artifacts_expired_at timestamptz;
-- Artifacts to expire: finished runs that captured something.
CREATE INDEX runs_artifacts_live_idx ON runs (finished_at)
    WHERE artifact_bytes > 0 AND artifacts_expired_at IS NULL;
