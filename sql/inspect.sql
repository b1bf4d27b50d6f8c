-- inspect.sql: the operator's ready queries. Copy one, or run them all:
--   psql -X -v run_id=<uuid> -v user_id=<user> -f sql/inspect.sql sandbox
-- (the embedded stack: psql -h var/run/pg -U sandbox sandbox).
-- Every query here is run against the live schema by the test suite.

\echo '== recent runs (last 20)'
SELECT id, user_id, runtime, base_image, phase, reason_code, exit_code,
       created_at, finished_at,
       round(extract(epoch FROM finished_at - created_at)::numeric, 3) AS total_sec
FROM runs ORDER BY created_at DESC LIMIT 20;

\echo '== one run (-v run_id=...)'
SELECT id, user_id, phase, reason_code, message, exit_code, runtime, runtime_version,
       base_image, image_digest, policy_hash, spec_version, node_id, attempt,
       created_at, started_at AS claimed_at, running_at, finished_at,
       resource_usage
FROM runs WHERE id::text = :'run_id';

\echo '== audit trail of one run (-v run_id=...)'
SELECT ts, event, user_id, source, node_id, outcome FROM audit_events
WHERE run_id::text = :'run_id' ORDER BY id;

\echo '== stuck runs: in flight with an expired lease, or past their timeouts'
SELECT id, user_id, phase, node_id, lease_until, created_at, running_at,
       now() - coalesce(running_at, started_at) AS in_phase_for
FROM runs
WHERE phase IN ('starting', 'running')
  AND (lease_until < now()
       OR (phase = 'starting' AND started_at < now() - make_interval(secs => startup_timeout_sec + 30))
       OR (phase = 'running' AND running_at < now() - make_interval(secs => timeout_sec + 30)))
ORDER BY created_at;

\echo '== queue depth and age'
SELECT count(*) AS queued, min(created_at) AS oldest,
       coalesce(max(now() - created_at), interval '0') AS max_wait
FROM runs WHERE phase = 'queued';

\echo '== in flight per node'
SELECT node_id, phase, count(*) FROM runs
WHERE phase IN ('starting', 'running') GROUP BY node_id, phase ORDER BY node_id, phase;

\echo '== per-user usage today (UTC)'
SELECT user_id, count(*) AS runs,
       count(*) FILTER (WHERE phase = 'completed') AS completed,
       count(*) FILTER (WHERE phase IN ('failed', 'timed_out', 'killed')) AS not_completed,
       round(sum(coalesce((resource_usage->>'cpu_time_sec')::numeric, 0)), 3) AS cpu_sec,
       sum(log_bytes) AS log_bytes
FROM runs WHERE created_at >= date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'
GROUP BY user_id ORDER BY runs DESC;

\echo '== outcomes in the last hour'
SELECT phase, coalesce(reason_code, '-') AS reason_code, count(*)
FROM runs WHERE created_at > now() - interval '1 hour'
GROUP BY 1, 2 ORDER BY 3 DESC;

\echo '== idempotency keys by endpoint'
SELECT endpoint, count(*) AS keys, min(created_at) AS oldest FROM idempotency
GROUP BY endpoint ORDER BY keys DESC;

\echo '== idempotency keys of one user (-v user_id=...)'
SELECT endpoint, key, object_id, status, created_at FROM idempotency
WHERE user_id = :'user_id' ORDER BY created_at DESC LIMIT 20;

\echo '== live sessions: owner, expiry, node, runs'
SELECT s.id, s.user_id, s.state, s.base_image, s.created_at, s.expires_at, s.node_id,
       (SELECT count(*) FROM runs r WHERE r.session_id = s.id) AS runs
FROM sessions s WHERE s.state IN ('provisioning', 'ready') ORDER BY s.expires_at;

\echo '== artifacts of one run (-v run_id=...)'
SELECT path, type, size, target, created_at FROM artifacts
WHERE run_id = :'run_id' ORDER BY path;

\echo '== metrics the database keeps (counters)'
SELECT name, labels, value FROM metric_counters
WHERE name NOT LIKE '%\_bucket' ORDER BY name, labels::text;

\echo '== nodes and heartbeats'
SELECT node_id, hostname, version, pid, started_at, heartbeat_at,
       now() - heartbeat_at AS heartbeat_age, runtimes
FROM nodes ORDER BY heartbeat_at DESC;

\echo '== image catalog'
SELECT name, digest, packages, pg_size_pretty(size_bytes) AS size, node_id, updated_at
FROM images ORDER BY name;

\echo '== API keys: owner, role, last use'
SELECT k.id, k.user_id, u.role, k.label, k.created_at, k.last_used_at, k.revoked_at
FROM api_keys k JOIN users u ON u.id = k.user_id ORDER BY k.created_at;

\echo '== schema migrations'
SELECT version, name, applied_at FROM schema_migrations ORDER BY version;
