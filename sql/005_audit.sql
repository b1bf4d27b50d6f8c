-- 005: the audit trail. One row per event of the PRD's list, written by
-- triggers on the runs table, so no code path (api, supervisor, recovery,
-- queue expiry) can change a run's phase without leaving its event. Rows
-- carry who, from where, what ran where, under which policy and with what
-- outcome; never the command, its files, its environment or any secret.
-- Append-only: updates are refused; deletes only by the retention sweep.

CREATE TABLE audit_events (
    id            bigserial PRIMARY KEY,
    event         text NOT NULL,
    ts            timestamptz NOT NULL DEFAULT clock_timestamp(),
    user_id       text NOT NULL,
    source        text,
    run_id        uuid,
    session_id    uuid,
    runtime       text,
    runtime_version text,
    base_image    text,
    image_digest  text,
    policy_hash   text,
    spec_version  text,
    request_id    text,
    node_id       text,
    outcome       jsonb
);
CREATE INDEX audit_run_idx ON audit_events (run_id, id);
CREATE INDEX audit_ts_idx ON audit_events (ts);
CREATE INDEX audit_user_ts_idx ON audit_events (user_id, ts);

CREATE FUNCTION audit_run() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    ev text[];
    e text;
BEGIN
    IF TG_OP = 'INSERT' THEN
        ev := ARRAY['sandbox.run.created', 'sandbox.run.' || NEW.phase];
    ELSIF NEW.phase IS DISTINCT FROM OLD.phase THEN
        ev := ARRAY['sandbox.run.' || NEW.phase];
    ELSE
        RETURN NULL;
    END IF;
    FOREACH e IN ARRAY ev LOOP
        INSERT INTO audit_events (event, user_id, source, run_id, session_id, runtime,
            runtime_version, base_image, image_digest, policy_hash, spec_version,
            request_id, node_id, outcome)
        VALUES (e, NEW.user_id, NEW.source, NEW.id, NEW.session_id, NEW.runtime,
            NEW.runtime_version, NEW.base_image, NEW.image_digest, NEW.policy_hash,
            NEW.spec_version, NEW.request_id, NEW.node_id,
            CASE WHEN NEW.phase IN ('completed', 'failed', 'timed_out', 'killed') THEN
                jsonb_build_object('phase', NEW.phase, 'exit_code', NEW.exit_code,
                    'reason_code', NEW.reason_code, 'message', NEW.message,
                    'resource_usage', NEW.resource_usage)
            ELSE jsonb_build_object('phase', NEW.phase) END);
    END LOOP;
    RETURN NULL;
END $$;
CREATE TRIGGER runs_audit AFTER INSERT OR UPDATE OF phase ON runs
    FOR EACH ROW EXECUTE FUNCTION audit_run();

CREATE FUNCTION audit_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' AND current_setting('sandbox.audit_retention', true) = 'on' THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION 'audit_events is append-only (% refused)', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END $$;
CREATE TRIGGER audit_events_append_only BEFORE UPDATE OR DELETE ON audit_events
    FOR EACH ROW EXECUTE FUNCTION audit_append_only();
