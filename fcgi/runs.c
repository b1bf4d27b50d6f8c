/* runs.c: POST /runs, GET /runs/{id}, GET /runs/{id}/logs,
 * POST /runs/{id}/cancel. The api only writes and reads rows; the
 * supervisor that claims a run does everything else. */
#include "idempotency.h"
#include "metrics.h"
#include "router.h"
#include "run_spec.h"
#include "../lib/config.h"
#include "../lib/crypto.h"
#include "../lib/log.h"
#include "../lib/policy.h"
#include "../lib/util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define TS(col) "to_char(" col " AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')"

/* The public shape of a run (GET /runs/{id}). */
static const char RUN_JSON[] =
	"json_build_object("
	" 'id', id, 'run_id', id, 'session_id', session_id, 'phase', phase,"
	" 'exit_code', exit_code, 'reason_code', reason_code, 'message', message,"
	" 'spec_version', spec_version, 'runtime', runtime,"
	" 'runtime_version', runtime_version, 'base_image', base_image,"
	" 'image_digest', image_digest, 'policy_hash', policy_hash,"
	" 'command', command, 'capture_patterns', capture_patterns,"
	" 'network_policy', network_policy, 'interactive', interactive,"
	" 'stdin_limits', CASE WHEN interactive THEN stdin_limits END,"
	" 'created_at', " TS("created_at") ", 'started_at', " TS("running_at") ","
	" 'starting_at', " TS("started_at") ", 'finished_at', " TS("finished_at") ","
	" 'timeout_sec', timeout_sec, 'startup_timeout_sec', startup_timeout_sec,"
	" 'resource_usage', coalesce(resource_usage, json_build_object("
	"   'log_bytes', log_bytes, 'artifact_bytes', artifact_bytes,"
	"   'limits', json_build_object('cpu', cpu, 'memory_mb', memory_mb,"
	"     'pids', pids_limit, 'nofile', nofile, 'nproc', nproc,"
	"     'startup_timeout_sec', startup_timeout_sec, 'timeout_sec', timeout_sec)"
	"   )::jsonb)"
	")::text";

static void stream_url(struct request *r, const char *id, int64_t from_seq, char *out,
		       size_t outlen)
{
	const char *pub = cfg_str(CFG_PUBLIC_URL), *host = req_param(r, "HTTP_HOST");
	char base[300];

	if (*pub) {
		if (strncmp(pub, "https://", 8) == 0)
			(void)snprintf(base, sizeof(base), "wss://%s", pub + 8);
		else if (strncmp(pub, "http://", 7) == 0)
			(void)snprintf(base, sizeof(base), "ws://%s", pub + 7);
		else
			(void)strlcpy_ok(base, pub, sizeof(base));
	} else {
		(void)snprintf(base, sizeof(base), "wss://%.200s", host ? host : "localhost");
	}
	(void)snprintf(out, outlen, "%s/api/v1/sandbox/runs/%s/stream", base, id);
	if (cfg_bool(CFG_WS_SIGNED_URLS)) {
		char exp[32], tok[65];
		size_t n = strlen(out);
		rfc3339_utc(time(NULL) + cfg_int(CFG_WS_SIGNED_URL_TTL_SEC), exp);
		stream_token(id, exp, tok);
		(void)snprintf(out + n, outlen - n, "?token=%s&exp=%s", tok, exp);
	}
	if (from_seq > 0) {
		size_t n = strlen(out);
		(void)snprintf(out + n, outlen - n, "%sfrom_seq=%lld", strchr(out, '?') ? "&" : "?",
			       (long long)from_seq);
	}
}

static void rollback(struct request *r)
{
	(void)db_command(r->db, "ROLLBACK", 0, NULL);
}

struct quota_use {
	long long queued, to_midnight, artifact_bytes, artifacts_free_in;
	double cpu_sec, avg_run_sec;
};

static void refuse(struct request *r, const char *reason, double limit, double current,
		   long long retry_after, const char *what)
{
	char hdr[64];
	struct json_object *d = json_object_new_object();

	if (retry_after < 1)
		retry_after = 1;
	(void)snprintf(hdr, sizeof(hdr), "Retry-After: %lld\r\n", retry_after);
	json_object_object_add(d, "reason", json_object_new_string(reason));
	json_object_object_add(d, "limit", json_object_new_double(limit));
	json_object_object_add(d, "current", json_object_new_double(current));
	json_object_object_add(d, "scope", json_object_new_string("user"));
	json_object_object_add(d, "retry_after_sec", json_object_new_int64(retry_after));
	respond_error_h(r, 429, hdr, "quota_exceeded", d, "quota exceeded: %s; retry after %lld s",
			what, retry_after);
	log_msg(LOG_LVL_WARN, log_fields("reason", reason, "user_id", r->user.id, NULL),
		"quota exceeded");
}

/* Per-user quotas at admission (concurrency itself is the scheduler's:
 * runs past SANDBOX_USER_MAX_CONCURRENT_RUNS wait in the queue). True
 * after having answered 429. */
static bool quota_refuse(struct request *r, const struct quota_use *u, bool captures)
{
	long long max_queued = cfg_int(CFG_USER_MAX_QUEUED_RUNS);
	long long cpu = cfg_int(CFG_USER_DAILY_CPU_SEC);
	long long art = cfg_int(CFG_MAX_ARTIFACT_BYTES_PER_USER_MB) * 1024 * 1024;

	if (u->queued >= max_queued) {
		refuse(r, "queued_runs", (double)max_queued, (double)u->queued,
		       (long long)(u->avg_run_sec + 1),
		       "too many runs of yours are queued (SANDBOX_USER_MAX_QUEUED_RUNS)");
		return true;
	}
	if (cpu > 0 && u->cpu_sec >= (double)cpu) {
		refuse(r, "cpu_seconds_per_day", (double)cpu, u->cpu_sec, u->to_midnight,
		       "your CPU seconds for today are used up (SANDBOX_USER_DAILY_CPU_SEC; "
		       "the day is UTC)");
		return true;
	}
	if (captures && u->artifact_bytes >= art) {
		refuse(r, "artifact_bytes", (double)art, (double)u->artifact_bytes,
		       u->artifacts_free_in + cfg_int(CFG_REAPER_INTERVAL_SEC),
		       "your stored artifacts reach SANDBOX_MAX_ARTIFACT_BYTES_PER_USER_MB "
		       "until the oldest expire");
		return true;
	}
	return false;
}

void h_runs_create(struct request *r)
{
	struct run_spec s __attribute__((cleanup(run_spec_free))) = { 0 };
	const char *key = NULL;
	char id[37], fp[65], policy[65], num[8][32], url[512];
	struct json_object *body = req_json_body(r, (size_t)cfg_int(CFG_MAX_JSON_BODY_KB) * 1024);

	if (!body)
		return;
	if (idem_key_from_request(r, &key) < 0 || run_spec_parse(r, body, &s) < 0) {
		json_object_put(body);
		return;
	}
	uuid_v4(id);
	json_fingerprint(body, fp);
	policy_hash(policy);

	if (!db_command(r->db, "BEGIN", 0, NULL))
		goto dberr;
	if (key) {
		enum idem_result ir = idem_open(r, "runs", key, fp, id);
		if (ir == IDEM_ERROR)
			goto dberr_rb;
		if (ir != IDEM_NEW) { /* answered: a replay or a conflict */
			json_object_put(body);
			return;
		}
	}
	/* Admission is serialised so queue_max_length is exact. */
	char ttl_hours[16];
	(void)snprintf(ttl_hours, sizeof(ttl_hours), "%lld",
		       (long long)cfg_int(CFG_ARTIFACT_TTL_HOURS));
	PGresult *q = db_exec(
		r->db,
		"SELECT pg_advisory_xact_lock(hashtext('sandbox.queue')), "
		" (SELECT count(*) FROM runs WHERE phase = 'queued'), "
		" (SELECT count(*) FROM runs WHERE phase IN ('starting', 'running')), "
		" (SELECT coalesce(avg(extract(epoch FROM finished_at - started_at)), 1) FROM "
		"   (SELECT finished_at, started_at FROM runs WHERE finished_at IS NOT NULL "
		"    AND started_at IS NOT NULL AND finished_at >= started_at"
		"    ORDER BY finished_at DESC LIMIT 50) t)::float8, "
		/* The user's quotas: queued runs, CPU seconds of runs created
		 * this UTC day, artifact bytes kept. */
		" (SELECT count(*) FROM runs WHERE phase = 'queued' AND user_id = $1), "
		" (SELECT coalesce(sum((resource_usage->>'cpu_time_sec')::float8), 0) FROM runs"
		"   WHERE user_id = $1 AND created_at >= date_trunc('day', now(), 'UTC')), "
		" ceil(extract(epoch FROM date_trunc('day', now(), 'UTC') + interval '1 day' - now())), "
		" (SELECT coalesce(sum(artifact_bytes), 0) FROM runs WHERE user_id = $1"
		"   AND artifacts_expired_at IS NULL), "
		" (SELECT ceil(extract(epoch FROM min(finished_at) + make_interval(hours => $2::int)"
		"   - now())) FROM runs WHERE user_id = $1 AND artifacts_expired_at IS NULL"
		"   AND artifact_bytes > 0)",
		2, (const char *[]){ r->user.id, ttl_hours });
	if (!q)
		goto dberr_rb;
	long long queued = atoll(PQgetvalue(q, 0, 1));
	long long active = atoll(PQgetvalue(q, 0, 2));
	double avg = atof(PQgetvalue(q, 0, 3));
	struct quota_use use = {
		.queued = atoll(PQgetvalue(q, 0, 4)),
		.cpu_sec = atof(PQgetvalue(q, 0, 5)),
		.to_midnight = atoll(PQgetvalue(q, 0, 6)),
		.artifact_bytes = atoll(PQgetvalue(q, 0, 7)),
		.artifacts_free_in = PQgetisnull(q, 0, 8) ? 60 : atoll(PQgetvalue(q, 0, 8)),
		.avg_run_sec = avg,
	};
	PQclear(q);
	if (quota_refuse(r, &use, s.capture && json_object_array_length(s.capture) > 0)) {
		rollback(r);
		json_object_put(body);
		return;
	}
	if (queued >= cfg_int(CFG_QUEUE_MAX_LENGTH)) {
		rollback(r);
		int retry = (int)(avg * (double)(queued + 1) / (double)cfg_int(CFG_MAX_CONCURRENT_RUNS)) + 1;
		if (retry < 1)
			retry = 1;
		char hdr[64];
		(void)snprintf(hdr, sizeof(hdr), "Retry-After: %d\r\n", retry);
		struct json_object *d = json_object_new_object();
		json_object_object_add(d, "queue_max_length",
				       json_object_new_int64(cfg_int(CFG_QUEUE_MAX_LENGTH)));
		json_object_object_add(d, "queued", json_object_new_int64(queued));
		json_object_object_add(d, "retry_after_sec", json_object_new_int(retry));
		respond_error_h(r, 429, hdr, "queue_full", d,
				"the run queue is full (%lld queued); retry after %d s",
				queued, retry);
		log_msg(LOG_LVL_WARN, log_fields("reason", "queue_full", NULL), "queue full");
		metrics_queue_full(s.runtime);
		json_object_put(body);
		return;
	}
	/* Where this run will start, roughly: waves of max_concurrent runs
	 * of the recent average duration. */
	long long ahead = queued + active - cfg_int(CFG_MAX_CONCURRENT_RUNS) + 1;
	double eta = ahead > 0 ? avg * (double)(ahead / cfg_int(CFG_MAX_CONCURRENT_RUNS) + 1) : 0;

	(void)snprintf(num[0], sizeof(num[0]), "%.4f", s.cpu);
	(void)snprintf(num[1], sizeof(num[1]), "%d", s.memory_mb);
	(void)snprintf(num[2], sizeof(num[2]), "%d", s.pids);
	(void)snprintf(num[3], sizeof(num[3]), "%lld", (long long)cfg_int(CFG_ULIMIT_NOFILE));
	(void)snprintf(num[4], sizeof(num[4]), "%lld", (long long)cfg_int(CFG_ULIMIT_NPROC));
	(void)snprintf(num[5], sizeof(num[5]), "%d", s.timeout_sec);
	(void)snprintf(num[6], sizeof(num[6]), "%d", s.startup_timeout_sec);
	(void)snprintf(num[7], sizeof(num[7]), "%.3f", eta);
	const char *src = req_param(r, "HTTP_X_SANDBOX_SOURCE");
	char stdin_limits[256];
	(void)snprintf(stdin_limits, sizeof(stdin_limits),
		       "{\"stdin_max_bytes\":%lld,\"stdin_max_frame_bytes\":%lld,"
		       "\"stdin_bps\":%lld,\"stdin_idle_timeout_sec\":%lld}",
		       (long long)s.stdin_max_bytes, (long long)s.stdin_max_frame_bytes,
		       (long long)s.stdin_bps, (long long)s.stdin_idle_timeout_sec);
	const char *p[] = {
		id, r->user.id, s.spec_version, s.runtime, s.base_image, s.image, s.digest,
		json_object_to_json_string_ext(s.command, JSON_C_TO_STRING_PLAIN),
		s.env ? json_object_to_json_string_ext(s.env, JSON_C_TO_STRING_PLAIN) : "{}",
		s.files ? json_object_to_json_string_ext(s.files, JSON_C_TO_STRING_PLAIN) : NULL,
		s.capture ? json_object_to_json_string_ext(s.capture, JSON_C_TO_STRING_PLAIN) : "[]",
		num[0], num[1], num[2], num[3], num[4], num[5], num[6], policy,
		r->request_id, src && strlen(src) <= 32 ? src : "API", num[7],
		s.interactive ? "true" : "false", stdin_limits, s.session_id
	};
	PGresult *ins = db_exec(
		r->db,
		"INSERT INTO runs (id, user_id, spec_version, runtime, base_image, image,"
		"  image_digest, command, env, files, capture_patterns, cpu, memory_mb,"
		"  pids_limit, nofile, nproc, timeout_sec, startup_timeout_sec, policy_hash,"
		"  request_id, source, interactive, stdin_limits, session_id) "
		"VALUES ($1::uuid, $2, $3, $4, $5, $6, $7, $8::jsonb, $9::jsonb, $10::jsonb,"
		"  $11::jsonb, $12::float8, $13::int, $14::int, $15::int, $16::int, $17::int,"
		"  $18::int, $19, $20, $21, $23::boolean, $24::jsonb, $25::uuid) "
		"RETURNING " TS("created_at") ", "
		TS("(now() + make_interval(secs => $22::float8))"),
		25, p);
	if (!ins)
		goto dberr_rb;
	struct json_object *out = json_object_new_object();
	stream_url(r, id, s.resume_from_seq, url, sizeof(url));
	json_object_object_add(out, "run_id", json_object_new_string(id));
	json_object_object_add(out, "id", json_object_new_string(id));
	json_object_object_add(out, "phase", json_object_new_string("queued"));
	if (s.session_id)
		json_object_object_add(out, "session_id", json_object_new_string(s.session_id));
	json_object_object_add(out, "spec_version", json_object_new_string(s.spec_version));
	json_object_object_add(out, "runtime", json_object_new_string(s.runtime));
	json_object_object_add(out, "base_image", json_object_new_string(s.base_image));
	json_object_object_add(out, "image_digest", json_object_new_string(s.digest));
	json_object_object_add(out, "policy_hash", json_object_new_string(policy));
	json_object_object_add(out, "log_stream_url", json_object_new_string(url));
	json_object_object_add(out, "created_at", json_object_new_string(PQgetvalue(ins, 0, 0)));
	json_object_object_add(out, "estimated_start_time",
			       json_object_new_string(PQgetvalue(ins, 0, 1)));
	if (key)
		json_object_object_add(out, "idempotency_key", json_object_new_string(key));
	PQclear(ins);
	if (key && idem_finish(r, "runs", key, 202, out) < 0) {
		json_object_put(out);
		goto dberr_rb;
	}
	if (!db_command(r->db, "COMMIT", 0, NULL)) {
		json_object_put(out);
		goto dberr;
	}
	/* The audit events' JSON log lines (their rows come from the trigger). */
	static const char *const events[] = { "sandbox.run.created", "sandbox.run.queued" };
	for (size_t i = 0; i < ARRAY_SIZE(events); i++)
		log_msg(LOG_LVL_INFO,
			log_fields("event", events[i], "run_id", id, "user_id", r->user.id,
				   "base_image", s.base_image, "image_digest", s.digest,
				   "runtime", s.runtime, "policy_hash", policy,
				   "spec_version", s.spec_version,
				   "source", src && strlen(src) <= 32 ? src : "API", NULL),
			"%s", events[i]);
	json_object_put(body);
	respond_json(r, 202, out);
	return;
dberr_rb:
	rollback(r);
dberr:
	json_object_put(body);
	respond_db_error(r);
}

PGresult *run_lookup(struct request *r, const char *id, const char *cols,
		     const char *owner)
{
	char sql[4096];

	if (!uuid_valid(id)) {
		respond_error(r, 404, "not_found", NULL, "run %.64s not found", id);
		return NULL;
	}
	(void)snprintf(sql, sizeof(sql),
		       "SELECT %s FROM runs WHERE id = $1::uuid AND ($2::text IS NULL OR user_id = $2)",
		       cols);
	const char *p[] = { id, owner };
	PGresult *res = db_exec(r->db, sql, 2, p);
	if (!res) {
		respond_db_error(r);
		return NULL;
	}
	if (PQntuples(res) == 0) {
		PQclear(res);
		respond_error(r, 404, "not_found", NULL, "run %s not found", id);
		return NULL;
	}
	return res;
}

static PGresult *own_run(struct request *r, const char *cols)
{
	return run_lookup(r, r->params[0], cols, r->user.id);
}

void h_run_get(struct request *r)
{
	char url[512];
	_cleanup_pgres_ PGresult *res = own_run(r, RUN_JSON);

	if (!res)
		return;
	struct json_object *o = json_tokener_parse(PQgetvalue(res, 0, 0));
	stream_url(r, r->params[0], 0, url, sizeof(url));
	json_object_object_add(o, "log_stream_url", json_object_new_string(url));
	respond_json(r, 200, o);
}

/* The recorded frames as a JSON array (PRD WS frames), from ?from_seq=n. */
void h_run_logs(struct request *r)
{
	_cleanup_pgres_ PGresult *res = own_run(r, "phase");
	_cleanup_free_ char *from = NULL;
	char path[700];
	int64_t from_seq = 1;
	const char *why;

	if (!res)
		return;
	from = req_query(r, "from_seq");
	if (from && parse_i64(from, 1, INT64_MAX, &from_seq, &why) < 0) {
		respond_error(r, 400, "invalid_request", log_fields("field", "from_seq", NULL),
			      "from_seq must be a positive integer");
		return;
	}
	(void)snprintf(path, sizeof(path), "%s/runs/%s/frames.jsonl", cfg_str(CFG_DATA_ROOT),
		       r->params[0]);
	FILE *f = fopen(path, "re");
	r->status = 200;
	FCGX_FPrintF(r->fcgx->out, "Status: 200 OK\r\nContent-Type: application/json\r\n"
				   "Cache-Control: no-store\r\n\r\n[");
	if (f) {
		char *line = NULL;
		size_t cap = 0;
		ssize_t n;
		int64_t seq = 0;
		bool first = true;
		while ((n = getline(&line, &cap, f)) > 0) {
			if (line[n - 1] != '\n')
				break; /* a frame still being written */
			seq++;
			if (seq < from_seq)
				continue;
			if (!first)
				FCGX_PutChar(',', r->fcgx->out);
			FCGX_PutStr(line, (int)n - 1, r->fcgx->out);
			first = false;
		}
		free(line);
		fclose(f);
	}
	FCGX_PutChar(']', r->fcgx->out);
}

void h_run_cancel(struct request *r)
{
	const char *id = r->params[0];

	if (!uuid_valid(id)) {
		respond_error(r, 404, "not_found", NULL, "run %.64s not found", id);
		return;
	}
	const char *p[] = { id, r->user.id };
	/* A queued run ends at once; a started one is the supervisor's to
	 * stop (the trigger NOTIFYs it). */
	_cleanup_pgres_ PGresult *res = db_exec(
		r->db,
		"UPDATE runs SET cancel_requested_at = coalesce(cancel_requested_at, now()),"
		"  phase = CASE WHEN phase = 'queued' THEN 'killed' ELSE phase END,"
		"  reason_code = CASE WHEN phase = 'queued' THEN 'canceled_by_user' ELSE reason_code END,"
		"  message = CASE WHEN phase = 'queued' THEN 'canceled_by_user' ELSE message END,"
		"  finished_at = CASE WHEN phase = 'queued' THEN now() ELSE finished_at END "
		"WHERE id = $1::uuid AND user_id = $2 AND phase IN ('queued', 'starting', 'running') "
		"RETURNING phase",
		2, p);
	if (!res) {
		respond_db_error(r);
		return;
	}
	struct json_object *o = json_object_new_object();
	json_object_object_add(o, "run_id", json_object_new_string(id));
	if (PQntuples(res) == 1) {
		json_object_object_add(o, "cancelled", json_object_new_boolean(1));
		json_object_object_add(o, "phase", json_object_new_string(PQgetvalue(res, 0, 0)));
		json_object_object_add(o, "message", json_object_new_string("canceled_by_user"));
		respond_json(r, 202, o);
		return;
	}
	json_object_put(o);
	_cleanup_pgres_ PGresult *cur = own_run(r, "phase");
	if (!cur)
		return;
	o = json_object_new_object();
	json_object_object_add(o, "run_id", json_object_new_string(id));
	json_object_object_add(o, "cancelled", json_object_new_boolean(0));
	json_object_object_add(o, "phase", json_object_new_string(PQgetvalue(cur, 0, 0)));
	json_object_object_add(o, "message", json_object_new_string("the run had already finished"));
	respond_json(r, 200, o);
}

/* GET /runs: the caller's runs, newest first (?phase, ?session_id,
 * ?limit, ?offset), for history views. */
void h_runs_list(struct request *r)
{
	int64_t limit = 20, offset = 0;
	const char *why;
	_cleanup_free_ char *lim = req_query(r, "limit"), *off = req_query(r, "offset"),
			    *phase = req_query(r, "phase"), *sid = req_query(r, "session_id");

	if ((lim && parse_i64(lim, 1, 200, &limit, &why) < 0) ||
	    (off && parse_i64(off, 0, 100000000, &offset, &why) < 0) ||
	    (sid && !uuid_valid(sid))) {
		respond_error(r, 400, "invalid_request", NULL,
			      "limit must be 1..200, offset >= 0, session_id a uuid");
		return;
	}
	char nl[24], no[24], sql[4096];
	(void)snprintf(nl, sizeof(nl), "%lld", (long long)limit);
	(void)snprintf(no, sizeof(no), "%lld", (long long)offset);
	(void)snprintf(sql, sizeof(sql),
		       "WITH f AS (SELECT * FROM runs WHERE user_id = $1"
		       "  AND ($2::text IS NULL OR phase = $2)"
		       "  AND ($3::uuid IS NULL OR session_id = $3::uuid)) "
		       "SELECT (SELECT count(*) FROM f), coalesce((SELECT json_agg(j ORDER BY c DESC) FROM"
		       " (SELECT %s::json AS j, created_at AS c FROM f ORDER BY created_at DESC"
		       "  LIMIT $4::int OFFSET $5::int) t), '[]')",
		       RUN_JSON);
	const char *p[] = { r->user.id, phase, sid, nl, no };
	_cleanup_pgres_ PGresult *res = db_exec(r->db, sql, 5, p);
	if (!res) {
		respond_db_error(r);
		return;
	}
	respond_page(r, PQgetvalue(res, 0, 1), atoll(PQgetvalue(res, 0, 0)), limit, offset);
}
