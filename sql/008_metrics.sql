-- 008: metrics kept by the database itself. Triggers on runs and sessions
-- count and observe every transition as it is written, whichever process
-- (api, supervisor, recovery, queue expiry) writes it, so the numbers are
-- cluster-wide, survive restarts and cost one small table to read.
-- Histograms are stored Prometheus-style: cumulative `_bucket` series
-- with an `le` label, plus `_sum` and `_count`.

CREATE TABLE metric_counters (
    name    text NOT NULL,
    labels  jsonb NOT NULL DEFAULT '{}',
    value   double precision NOT NULL DEFAULT 0,
    PRIMARY KEY (name, labels)
);

CREATE FUNCTION metric_add(n text, l jsonb, v double precision) RETURNS void
LANGUAGE sql AS $$
    INSERT INTO metric_counters (name, labels, value) VALUES (n, l, v)
    ON CONFLICT (name, labels) DO UPDATE SET value = metric_counters.value + EXCLUDED.value;
$$;

-- Seconds buckets for durations from milliseconds to an hour.
CREATE FUNCTION metric_observe(n text, l jsonb, v double precision) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    b double precision;
BEGIN
    IF v IS NULL OR v < 0 THEN
        RETURN;
    END IF;
    FOREACH b IN ARRAY ARRAY[0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 3600]
    LOOP
        IF v <= b THEN
            PERFORM metric_add(n || '_bucket', l || jsonb_build_object('le', b::text), 1);
        END IF;
    END LOOP;
    PERFORM metric_add(n || '_bucket', l || jsonb_build_object('le', '+Inf'), 1);
    PERFORM metric_add(n || '_sum', l, v);
    PERFORM metric_add(n || '_count', l, 1);
END $$;

CREATE FUNCTION metrics_runs() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    rt jsonb := jsonb_build_object('runtime', NEW.runtime);
    labels jsonb;
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM metric_add('sandbox_runs_started_total', rt, 1);
        RETURN NULL;
    END IF;
    IF NEW.phase IS NOT DISTINCT FROM OLD.phase THEN
        RETURN NULL;
    END IF;
    IF OLD.phase = 'queued' AND NEW.phase = 'starting' THEN
        PERFORM metric_observe('sandbox_queue_wait_seconds', rt,
            extract(epoch FROM coalesce(NEW.started_at, now()) - NEW.created_at));
    ELSIF NEW.phase = 'running' THEN
        PERFORM metric_observe('sandbox_run_start_latency_seconds', rt,
            extract(epoch FROM coalesce(NEW.running_at, now()) - NEW.created_at));
    ELSIF NEW.phase IN ('completed', 'failed', 'timed_out', 'killed') THEN
        labels := rt || jsonb_build_object('outcome', NEW.phase, 'reason',
            coalesce(NEW.reason_code, CASE WHEN NEW.exit_code IS NOT NULL
                THEN 'exit_code_' || NEW.exit_code ELSE 'none' END));
        PERFORM metric_add('sandbox_runs_completed_total', labels, 1);
        PERFORM metric_observe('sandbox_run_duration_seconds', labels,
            extract(epoch FROM coalesce(NEW.finished_at, now())
                - coalesce(NEW.running_at, NEW.started_at, NEW.created_at)));
        PERFORM metric_add('sandbox_log_bytes_total', rt, NEW.log_bytes);
        PERFORM metric_add('sandbox_artifact_bytes_total', rt, NEW.artifact_bytes);
        PERFORM metric_add('sandbox_run_cpu_seconds_total', rt,
            coalesce((NEW.resource_usage->>'cpu_time_sec')::double precision, 0));
        IF NEW.reason_code = 'queue_ttl_expired' THEN
            PERFORM metric_add('sandbox_queue_ttl_expired_total', jsonb_build_object(
                'component', 'supervisor', 'runtime', NEW.runtime, 'reason', 'queue_ttl_expired'), 1);
        END IF;
        IF coalesce((NEW.resource_usage->>'log_truncated')::boolean, false) THEN
            PERFORM metric_add('sandbox_log_truncations_total',
                jsonb_build_object('component', 'supervisor', 'reason', 'log_cap'), 1);
        END IF;
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER runs_metrics AFTER INSERT OR UPDATE OF phase ON runs
    FOR EACH ROW EXECUTE FUNCTION metrics_runs();

CREATE FUNCTION metrics_sessions() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM metric_add('sandbox_sessions_created_total',
        jsonb_build_object('runtime', NEW.runtime), 1);
    RETURN NULL;
END $$;
CREATE TRIGGER sessions_metrics AFTER INSERT ON sessions
    FOR EACH ROW EXECUTE FUNCTION metrics_sessions();

-- Quotas: a user's CPU seconds of the current UTC day and queued runs.
CREATE INDEX runs_user_queued_idx ON runs (user_id) WHERE phase = 'queued';
