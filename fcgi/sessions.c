/* sessions.c: POST /sessions, GET /sessions, GET /sessions/{id},
 * DELETE /sessions/{id}; a run's inheritance from its session.
 *
 * The api writes the row (state `provisioning`); a supervisor claims it,
 * mounts the workspace tmpfs and marks it `ready`. POST /sessions answers
 * once the session is ready, so an upload right after it finds its
 * workspace; a session no supervisor provisions in time is marked
 * `failed` and the answer is 503. */
#include "idempotency.h"
#include "router.h"
#include "run_spec.h"
#include "sessions.h"
#include "images.h"
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
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#define TS(col) "to_char(" col " AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')"
#define LIVE "state IN ('provisioning', 'ready')"

/* The public shape of a session (a format: the workspace cap). */
static const char SESSION_JSON_FMT[] =
	"json_build_object("
	" 'session_id', id, 'id', id, 'state', state, 'reason', reason,"
	" 'thread_id', thread_id, 'spec_version', spec_version,"
	" 'runtime', runtime, 'runtime_info', json_build_object('name', runtime, 'node_id', node_id),"
	" 'base_image', base_image, 'image_digest', image_digest, 'policy_hash', policy_hash,"
	" 'resources', json_build_object('cpu', cpu, 'memory_mb', memory_mb, 'pids', pids_limit),"
	" 'timeout_sec', timeout_sec, 'startup_timeout_sec', startup_timeout_sec,"
	" 'ttl_sec', ttl_sec, 'network_policy', network_policy, 'env', env, 'labels', labels,"
	" 'created_at', " TS("created_at") ", 'last_activity_at', " TS("last_activity_at") ","
	" 'expires_at', " TS("expires_at") ", 'max_expires_at', " TS("max_expires_at") ","
	" 'ended_at', " TS("ended_at") ","
	" 'workspace', json_build_object('cap_mb', %lld, 'freed', workspace_freed_at IS NOT NULL))::text";

static const char *session_cols(void)
{
	static char cols[2048];

	if (!cols[0])
		(void)snprintf(cols, sizeof(cols), SESSION_JSON_FMT,
			       (long long)cfg_int(CFG_WORKSPACE_CAP_MB));
	return cols;
}

struct session_spec {
	const char *spec_version, *runtime, *base_image, *thread_id;
	struct json_object *env, *labels;
	int ttl_sec;
	struct run_spec limits; /* cpu, memory_mb, pids, timeouts */
	char image[65], digest[80];
};

static int check_labels(struct request *r, struct json_object *labels)
{
	if (!labels)
		return 0;
	if (!json_object_is_type(labels, json_type_object) ||
	    json_object_object_length(labels) > 64)
		return spec_bad(r, 400, "labels", "must be an object of at most 64 strings");
	json_object_object_foreach(labels, k, v)
	{
		if (strlen(k) == 0 || strlen(k) > 128 || !spec_string(v) ||
		    json_object_get_string_len(v) > 1024)
			return spec_bad(r, 400, "labels",
					"keys of 1..128 and string values of at most 1024 bytes");
	}
	return 0;
}

static int session_spec_parse(struct request *r, struct json_object *body,
			      struct session_spec *s)
{
	static const char *const known[] = {
		"spec_version", "runtime", "base_image", "resources", "timeout_sec",
		"startup_timeout_sec", "ttl_sec", "network_policy", "env", "labels", "thread_id"
	};
	struct json_object *v = NULL, *res = NULL;

	memset(s, 0, sizeof(*s));
	if (spec_known_fields(r, body, known, ARRAY_SIZE(known), "session spec") < 0)
		return -1;
	if (spec_version_check(r, body, &s->spec_version) < 0)
		return -1;
	if (!json_object_object_get_ex(body, "base_image", &v) || !v || !spec_string(v) ||
	    json_object_get_string_len(v) == 0)
		return spec_bad(r, 400, "base_image", "is required: a non-empty string");
	s->base_image = json_object_get_string(v);
	s->runtime = cfg_str(CFG_DEFAULT_RUNTIME);
	if (json_object_object_get_ex(body, "runtime", &v) && v) {
		if (!spec_string(v))
			return spec_bad(r, 400, "runtime", "must be a string");
		s->runtime = json_object_get_string(v);
	}
	if (json_object_object_get_ex(body, "thread_id", &v) && v) {
		if (!spec_string(v) || json_object_get_string_len(v) == 0 ||
		    json_object_get_string_len(v) > 256)
			return spec_bad(r, 400, "thread_id", "must be a string of 1 to 256 bytes");
		s->thread_id = json_object_get_string(v);
	}
	json_object_object_get_ex(body, "env", &s->env);
	json_object_object_get_ex(body, "labels", &s->labels);
	json_object_object_get_ex(body, "resources", &res);
	if (spec_network_policy(r, body) < 0 || spec_env(r, s->env) < 0 ||
	    check_labels(r, s->labels) < 0 || spec_resources(r, res, &s->limits) < 0 ||
	    spec_int(r, body, "timeout_sec", (int)cfg_int(CFG_DEFAULT_EXEC_TIMEOUT_SEC), 1,
		     MAX_TIMEOUT_SEC, &s->limits.timeout_sec) < 0 ||
	    spec_int(r, body, "startup_timeout_sec",
		     (int)cfg_int(CFG_DEFAULT_STARTUP_TIMEOUT_SEC), 1, MAX_STARTUP_TIMEOUT_SEC,
		     &s->limits.startup_timeout_sec) < 0 ||
	    spec_int(r, body, "ttl_sec",
		     (int)(cfg_int(CFG_SESSION_TTL_SEC) < cfg_int(CFG_SESSION_MAX_LIFETIME)
				   ? cfg_int(CFG_SESSION_TTL_SEC)
				   : cfg_int(CFG_SESSION_MAX_LIFETIME)),
		     10, (int)cfg_int(CFG_SESSION_MAX_LIFETIME), &s->ttl_sec) < 0)
		return -1;
	if (runtime_check(r, s->runtime) < 0)
		return -1;
	return image_resolve(r, s->base_image, s->image, s->digest);
}

/* One session as JSON, of `owner` (NULL: anyone's); NULL if none. */
static struct json_object *session_json(struct request *r, const char *id, const char *owner,
					bool *dberr)
{
	char sql[4096];

	*dberr = false;
	(void)snprintf(sql, sizeof(sql),
		       "SELECT %s FROM sessions WHERE id = $1::uuid AND ($2::text IS NULL OR user_id = $2)",
		       session_cols());
	const char *p[] = { id, owner };
	_cleanup_pgres_ PGresult *res = db_exec(r->db, sql, 2, p);
	if (!res) {
		*dberr = true;
		return NULL;
	}
	if (PQntuples(res) == 0)
		return NULL;
	return json_tokener_parse(PQgetvalue(res, 0, 0));
}

/* Wait (polling, with backoff) until the session left `provisioning`.
 * Returns its state, or "" on timeout / database error. */
static void wait_provisioned(struct request *r, const char *id, int timeout_ms, char *state,
			     size_t statelen, char *reason, size_t reasonlen)
{
	int64_t deadline = now_mono_ms() + timeout_ms;
	long pause_us = 1000;

	state[0] = reason[0] = '\0';
	for (;;) {
		const char *p[] = { id };
		_cleanup_pgres_ PGresult *res = db_exec(
			r->db, "SELECT state, coalesce(reason, '') FROM sessions WHERE id = $1::uuid", 1, p);
		if (!res || PQntuples(res) == 0)
			return;
		if (strcmp(PQgetvalue(res, 0, 0), "provisioning") != 0) {
			(void)strlcpy_ok(state, PQgetvalue(res, 0, 0), statelen);
			(void)strlcpy_ok(reason, PQgetvalue(res, 0, 1), reasonlen);
			return;
		}
		if (now_mono_ms() >= deadline)
			return;
		struct timespec ts = { 0, pause_us * 1000 };
		nanosleep(&ts, NULL);
		if (pause_us < 50000)
			pause_us *= 2;
	}
}

static void touch(struct request *r, const char *id)
{
	const char *p[] = { id };
	(void)db_command(r->db,
			 "UPDATE sessions SET last_activity_at = now(), expires_at = least("
			 "  now() + make_interval(secs => ttl_sec), max_expires_at) "
			 "WHERE id = $1::uuid AND state = 'ready'",
			 1, p);
}

/* Answer with the session `id` once provisioned: 201 (or 200 when
 * reused), 503 when no supervisor provisioned it. */
static void answer_when_ready(struct request *r, const char *id, int status, bool reused,
			      const char *idem_key, int startup_timeout)
{
	char state[32], reason[256];
	int wait_ms = (startup_timeout < 10 ? startup_timeout : 10) * 1000;

	wait_provisioned(r, id, wait_ms, state, sizeof(state), reason, sizeof(reason));
	if (strcmp(state, "ready") != 0) {
		const char *p[] = { id, r->user.id, idem_key };
		/* Nothing half-made: the session ends `failed` (a supervisor
		 * that mounted it meanwhile frees it) and the key is released. */
		(void)db_command(r->db,
				 "UPDATE sessions SET state = 'failed', ended_at = now(),"
				 "  reason = coalesce(reason, 'no supervisor provisioned the session in time')"
				 " WHERE id = $1::uuid AND state = 'provisioning'",
				 1, p);
		if (idem_key)
			(void)db_command(r->db,
					 "DELETE FROM idempotency WHERE endpoint = 'sessions' AND user_id = $2"
					 " AND key = $3 AND object_id = $1::uuid",
					 3, p);
		struct json_object *d = json_object_new_object();
		json_object_object_add(d, "session_id", json_object_new_string(id));
		json_object_object_add(d, "reason", json_object_new_string(reason[0] ? reason : "timeout"));
		respond_error(r, 503, "runtime_unavailable", d,
			      "the session could not be provisioned: %s; retry shortly",
			      reason[0] ? reason : "no supervisor answered in time");
		return;
	}
	bool dberr;
	struct json_object *o = session_json(r, id, NULL, &dberr);
	if (!o) {
		respond_db_error(r);
		return;
	}
	json_object_object_add(o, "reused", json_object_new_boolean(reused));
	respond_json(r, status, o);
}

/* The caller's live session for thread_id, or "" (into out). */
static int thread_session(struct request *r, const char *thread, char out[37], int *startup)
{
	const char *p[] = { r->user.id, thread };
	_cleanup_pgres_ PGresult *res = db_exec(
		r->db,
		"SELECT id, startup_timeout_sec FROM sessions WHERE user_id = $1 AND thread_id = $2"
		" AND " LIVE " AND expires_at > now()",
		2, p);
	if (!res)
		return -1;
	out[0] = '\0';
	if (PQntuples(res) == 1) {
		(void)strlcpy_ok(out, PQgetvalue(res, 0, 0), 37);
		*startup = atoi(PQgetvalue(res, 0, 1));
	}
	return 0;
}

static void rollback(struct request *r)
{
	(void)db_command(r->db, "ROLLBACK", 0, NULL);
}

void h_sessions_create(struct request *r)
{
	struct session_spec s;
	const char *key = NULL;
	char id[37], fp[65], policy[65], num[6][32], reuse[37];
	struct json_object *body = req_json_body(r, (size_t)cfg_int(CFG_MAX_JSON_BODY_KB) * 1024);

	if (!body)
		return;
	if (idem_key_from_request(r, &key) < 0 || session_spec_parse(r, body, &s) < 0) {
		json_object_put(body);
		return;
	}
	uuid_v4(id);
	json_fingerprint(body, fp);
	policy_hash(policy);

	if (s.thread_id) { /* get-or-create: the live one comes back */
		int startup = 0;
		if (thread_session(r, s.thread_id, reuse, &startup) < 0)
			goto dberr;
		if (reuse[0]) {
			touch(r, reuse);
			json_object_put(body);
			answer_when_ready(r, reuse, 200, true, NULL, startup);
			return;
		}
	}
	if (!db_command(r->db, "BEGIN", 0, NULL))
		goto dberr;
	if (key) {
		enum idem_result ir = idem_open(r, "sessions", key, fp, id);
		if (ir == IDEM_ERROR)
			goto dberr_rb;
		if (ir != IDEM_NEW) { /* answered: a replay or a conflict */
			json_object_put(body);
			return;
		}
	}
	/* Quota: live sessions per user (each holds a workspace). */
	{
		const char *p[] = { r->user.id };
		_cleanup_pgres_ PGresult *q = db_exec(
			r->db,
			"SELECT pg_advisory_xact_lock(hashtext('sandbox.sessions.' || $1)),"
			" (SELECT count(*) FROM sessions WHERE user_id = $1 AND " LIVE ")",
			1, p);
		if (!q)
			goto dberr_rb;
		long long live = atoll(PQgetvalue(q, 0, 1));
		if (live >= cfg_int(CFG_USER_MAX_SESSIONS)) {
			rollback(r);
			struct json_object *d = json_object_new_object();
			json_object_object_add(d, "reason", json_object_new_string("sessions"));
			json_object_object_add(d, "limit", json_object_new_int64(cfg_int(CFG_USER_MAX_SESSIONS)));
			json_object_object_add(d, "current", json_object_new_int64(live));
			json_object_object_add(d, "scope", json_object_new_string("user"));
			respond_error(r, 429, "quota_exceeded", d,
				      "at most %lld live sessions per user; delete one "
				      "(DELETE /sessions/{id}) or let one expire",
				      (long long)cfg_int(CFG_USER_MAX_SESSIONS));
			json_object_put(body);
			return;
		}
	}
	(void)snprintf(num[0], sizeof(num[0]), "%.4f", s.limits.cpu);
	(void)snprintf(num[1], sizeof(num[1]), "%d", s.limits.memory_mb);
	(void)snprintf(num[2], sizeof(num[2]), "%d", s.limits.pids);
	(void)snprintf(num[3], sizeof(num[3]), "%d", s.limits.timeout_sec);
	(void)snprintf(num[4], sizeof(num[4]), "%d", s.limits.startup_timeout_sec);
	(void)snprintf(num[5], sizeof(num[5]), "%d", s.ttl_sec);
	char life[16];
	(void)snprintf(life, sizeof(life), "%lld", (long long)cfg_int(CFG_SESSION_MAX_LIFETIME));
	const char *src = req_param(r, "HTTP_X_SANDBOX_SOURCE");
	const char *p[] = {
		id, r->user.id, s.thread_id, s.spec_version, s.runtime, s.base_image, s.image,
		s.digest, num[0], num[1], num[2], num[3], num[4],
		s.env ? json_object_to_json_string_ext(s.env, JSON_C_TO_STRING_PLAIN) : "{}",
		s.labels ? json_object_to_json_string_ext(s.labels, JSON_C_TO_STRING_PLAIN) : "{}",
		policy, num[5], r->request_id, src && strlen(src) <= 32 ? src : "API", life
	};
	PGresult *ins = db_exec(
		r->db,
		"INSERT INTO sessions (id, user_id, thread_id, spec_version, runtime, base_image,"
		"  image, image_digest, cpu, memory_mb, pids_limit, timeout_sec, startup_timeout_sec,"
		"  env, labels, policy_hash, ttl_sec, request_id, source, expires_at, max_expires_at) "
		"VALUES ($1::uuid, $2, $3, $4, $5, $6, $7, $8, $9::float8, $10::int, $11::int,"
		"  $12::int, $13::int, $14::jsonb, $15::jsonb, $16, $17::int, $18, $19,"
		"  least(now() + make_interval(secs => $17::int), now() + make_interval(secs => $20::int)),"
		"  now() + make_interval(secs => $20::int)) "
		"ON CONFLICT DO NOTHING RETURNING id",
		20, p);
	if (!ins)
		goto dberr_rb;
	int inserted = PQntuples(ins);
	PQclear(ins);
	if (inserted == 0) {
		/* A concurrent request created the thread's session first. */
		rollback(r);
		int startup = 0;
		if (thread_session(r, s.thread_id ? s.thread_id : "", reuse, &startup) < 0 || !reuse[0])
			goto dberr;
		json_object_put(body);
		answer_when_ready(r, reuse, 200, true, NULL, startup);
		return;
	}
	if (key) {
		bool dberr;
		struct json_object *o = session_json(r, id, NULL, &dberr);
		if (!o)
			goto dberr_rb;
		json_object_object_add(o, "reused", json_object_new_boolean(0));
		int rc = idem_finish(r, "sessions", key, 201, o);
		json_object_put(o);
		if (rc < 0)
			goto dberr_rb;
	}
	if (!db_command(r->db, "COMMIT", 0, NULL))
		goto dberr;
	log_msg(LOG_LVL_INFO,
		log_fields("event", "sandbox.session.created", "session_id", id, "user_id",
			   r->user.id, "base_image", s.base_image, "image_digest", s.digest,
			   "runtime", s.runtime, "policy_hash", policy, "spec_version",
			   s.spec_version, "source", src && strlen(src) <= 32 ? src : "API", NULL),
		"sandbox.session.created");
	json_object_put(body);
	answer_when_ready(r, id, 201, false, key, s.limits.startup_timeout_sec);
	return;
dberr_rb:
	rollback(r);
dberr:
	json_object_put(body);
	respond_db_error(r);
}

void h_session_get(struct request *r)
{
	bool dberr;
	const char *id = r->params[0];

	if (!uuid_valid(id)) {
		respond_error(r, 404, "not_found", NULL, "session %.64s not found", id);
		return;
	}
	struct json_object *o = session_json(r, id, r->user.id, &dberr);
	if (!o) {
		if (dberr)
			respond_db_error(r);
		else
			respond_error(r, 404, "not_found", NULL, "session %s not found", id);
		return;
	}
	respond_json(r, 200, o);
}

void h_sessions_list(struct request *r)
{
	int64_t limit = 50, offset = 0;
	const char *why;
	_cleanup_free_ char *lim = req_query(r, "limit"), *off = req_query(r, "offset"),
			    *state = req_query(r, "state"), *thread = req_query(r, "thread_id");

	if ((lim && parse_i64(lim, 1, 200, &limit, &why) < 0) ||
	    (off && parse_i64(off, 0, 100000000, &offset, &why) < 0) ||
	    (state && strcmp(state, "live") && strcmp(state, "ready") && strcmp(state, "expired") &&
	     strcmp(state, "deleted") && strcmp(state, "failed") && strcmp(state, "provisioning"))) {
		respond_error(r, 400, "invalid_request", NULL,
			      "limit must be 1..200, offset >= 0, state one of live, provisioning, "
			      "ready, expired, deleted, failed");
		return;
	}
	char sql[4096], nl[24], no[24];
	(void)snprintf(nl, sizeof(nl), "%lld", (long long)limit);
	(void)snprintf(no, sizeof(no), "%lld", (long long)offset);
	(void)snprintf(sql, sizeof(sql),
		       "WITH f AS (SELECT * FROM sessions WHERE user_id = $1"
		       "  AND ($2::text IS NULL OR ($2 = 'live' AND " LIVE ") OR state = $2)"
		       "  AND ($3::text IS NULL OR thread_id = $3))"
		       "SELECT (SELECT count(*) FROM f),"
		       " coalesce((SELECT json_agg(j ORDER BY c DESC) FROM (SELECT %s::json AS j, created_at AS c"
		       "  FROM f ORDER BY created_at DESC LIMIT $4::int OFFSET $5::int) t), '[]')",
		       session_cols());
	const char *p[] = { r->user.id, state, thread, nl, no };
	_cleanup_pgres_ PGresult *res = db_exec(r->db, sql, 5, p);
	if (!res) {
		respond_db_error(r);
		return;
	}
	respond_page(r, PQgetvalue(res, 0, 1), atoll(PQgetvalue(res, 0, 0)), limit, offset);
}

/* DELETE: the session ends `deleted`; its supervisor kills its queued and
 * running runs (`killed`, session_deleted) and frees the workspace. The
 * answer waits (up to 5 s) for the workspace to be freed. */
void h_session_delete(struct request *r)
{
	const char *id = r->params[0];

	if (!uuid_valid(id)) {
		respond_error(r, 404, "not_found", NULL, "session %.64s not found", id);
		return;
	}
	const char *p[] = { id, r->user.id };
	_cleanup_pgres_ PGresult *res = db_exec(
		r->db,
		"WITH s AS (UPDATE sessions SET state = 'deleted', ended_at = now(),"
		"  reason = 'deleted_by_user' WHERE id = $1::uuid AND user_id = $2 AND " LIVE
		"  RETURNING id) "
		"SELECT (SELECT count(*) FROM s),"
		" (SELECT count(*) FROM runs WHERE session_id = $1::uuid"
		"   AND phase IN ('queued', 'starting', 'running'))",
		2, p);
	if (!res) {
		respond_db_error(r);
		return;
	}
	bool deleted = atoi(PQgetvalue(res, 0, 0)) == 1;
	long long active = atoll(PQgetvalue(res, 0, 1));
	if (!deleted) {
		bool dberr;
		struct json_object *cur = session_json(r, id, r->user.id, &dberr);
		if (!cur) {
			if (dberr)
				respond_db_error(r);
			else
				respond_error(r, 404, "not_found", NULL, "session %s not found", id);
			return;
		}
		struct json_object *st = NULL;
		json_object_object_get_ex(cur, "state", &st);
		struct json_object *o = json_object_new_object();
		json_object_object_add(o, "session_id", json_object_new_string(id));
		json_object_object_add(o, "deleted", json_object_new_boolean(0));
		json_object_object_add(o, "state", json_object_get(st));
		json_object_put(cur);
		respond_json(r, 200, o);
		return;
	}
	log_msg(LOG_LVL_INFO, log_fields("event", "sandbox.session.deleted", "session_id", id,
					 "user_id", r->user.id, NULL),
		"sandbox.session.deleted");
	bool freed = false;
	int64_t deadline = now_mono_ms() + 5000;
	for (long pause_us = 1000; !freed && now_mono_ms() < deadline;) {
		_cleanup_pgres_ PGresult *q = db_exec(
			r->db, "SELECT workspace_freed_at IS NOT NULL FROM sessions WHERE id = $1::uuid", 1, p);
		if (!q)
			break;
		freed = PQntuples(q) == 1 && PQgetvalue(q, 0, 0)[0] == 't';
		struct timespec ts = { 0, pause_us * 1000 };
		if (!freed)
			nanosleep(&ts, NULL);
		if (pause_us < 50000)
			pause_us *= 2;
	}
	struct json_object *o = json_object_new_object();
	json_object_object_add(o, "session_id", json_object_new_string(id));
	json_object_object_add(o, "deleted", json_object_new_boolean(1));
	json_object_object_add(o, "state", json_object_new_string("deleted"));
	json_object_object_add(o, "runs_killed", json_object_new_int64(active));
	json_object_object_add(o, "workspace_freed", json_object_new_boolean(freed));
	respond_json(r, 200, o);
}

static void respond_session_gone(struct request *r, const char *id, const char *state)
{
	struct json_object *d = json_object_new_object();
	json_object_object_add(d, "session_id", json_object_new_string(id));
	if (state) {
		json_object_object_add(d, "state", json_object_new_string(state));
		respond_error(r, 404, "not_found", d,
			      "session %s has ended (%s); create a new one with POST /sessions "
			      "(or pass thread_id to get-or-create one)",
			      id, state);
		return;
	}
	respond_error(r, 404, "not_found", d,
		      "session %.64s not found; create one with POST /sessions or run "
		      "one-shot with base_image",
		      id);
}

/* The caller's live session `id`, touched (activity moves expires_at),
 * with `cols` after its state in one round trip; NULL after having
 * answered (404 unknown, foreign or ended; 5xx for the database). */
static PGresult *live_session(struct request *r, const char *id, const char *cols)
{
	char sql[1024];

	if (!uuid_valid(id)) {
		respond_session_gone(r, id, NULL);
		return NULL;
	}
	(void)snprintf(sql, sizeof(sql),
		       "WITH touched AS (UPDATE sessions SET last_activity_at = now(),"
		       "  expires_at = least(now() + make_interval(secs => ttl_sec), max_expires_at)"
		       "  WHERE id = $1::uuid AND user_id = $2 AND state = 'ready' AND expires_at > now()"
		       "  RETURNING id) "
		       "SELECT CASE WHEN state = 'ready' AND expires_at <= now() THEN 'expired' ELSE state END,"
		       " %s FROM sessions WHERE id = $1::uuid AND user_id = $2",
		       cols);
	const char *p[] = { id, r->user.id };
	PGresult *res = db_exec(r->db, sql, 2, p);
	if (!res) {
		respond_db_error(r);
		return NULL;
	}
	if (PQntuples(res) == 0 || strcmp(PQgetvalue(res, 0, 0), "ready") != 0) {
		respond_session_gone(r, id, PQntuples(res) ? PQgetvalue(res, 0, 0) : NULL);
		PQclear(res);
		return NULL;
	}
	return res;
}

int session_for_run(struct request *r, const char *id, struct run_spec *s)
{
	_cleanup_pgres_ PGresult *res = live_session(
		r, id,
		"base_image, image, coalesce(image_digest, ''), runtime, cpu, memory_mb, pids_limit,"
		" timeout_sec, startup_timeout_sec, env::text");
	if (!res)
		return -1;
	(void)strlcpy_ok(s->session_buf, id, sizeof(s->session_buf));
	(void)strlcpy_ok(s->base_image_buf, PQgetvalue(res, 0, 1), sizeof(s->base_image_buf));
	(void)strlcpy_ok(s->image, PQgetvalue(res, 0, 2), sizeof(s->image));
	(void)strlcpy_ok(s->digest, PQgetvalue(res, 0, 3), sizeof(s->digest));
	(void)strlcpy_ok(s->runtime_buf, PQgetvalue(res, 0, 4), sizeof(s->runtime_buf));
	s->session_id = s->session_buf;
	s->base_image = s->base_image_buf;
	s->runtime = s->runtime_buf;
	s->cpu = atof(PQgetvalue(res, 0, 5));
	s->memory_mb = atoi(PQgetvalue(res, 0, 6));
	s->pids = atoi(PQgetvalue(res, 0, 7));
	s->timeout_sec = atoi(PQgetvalue(res, 0, 8));
	s->startup_timeout_sec = atoi(PQgetvalue(res, 0, 9));
	s->session_env = json_tokener_parse(PQgetvalue(res, 0, 10));
	return 0;
}

int session_workspace(struct request *r, const char *id, bool idle_only, int *ws_fd,
		      int *root_fd)
{
	char path[700];

	*ws_fd = *root_fd = -1;
	_cleanup_pgres_ PGresult *res = live_session(
		r, id,
		"(SELECT id FROM runs WHERE session_id = $1::uuid AND phase IN ('starting', 'running')"
		" LIMIT 1)");
	if (!res)
		return -1;
	if (idle_only && !PQgetisnull(res, 0, 1)) {
		struct json_object *d = json_object_new_object();
		json_object_object_add(d, "session_id", json_object_new_string(id));
		json_object_object_add(d, "run_id", json_object_new_string(PQgetvalue(res, 0, 1)));
		respond_error(r, 409, "session_busy", d,
			      "a run of this session is active; change its files when it has "
			      "ended (or cancel it)");
		return -1;
	}
	(void)snprintf(path, sizeof(path), "%s/sessions/%s", cfg_str(CFG_DATA_ROOT), id);
	*root_fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (*root_fd >= 0)
		*ws_fd = openat(*root_fd, "workspace", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (*ws_fd < 0) {
		log_msg(LOG_LVL_ERROR, log_fields("session_id", id, NULL),
			"workspace of a ready session missing: %s", strerror(errno));
		if (*root_fd >= 0)
			close(*root_fd);
		*root_fd = -1;
		respond_error(r, 503, "service_unavailable", NULL,
			      "the session's workspace is not reachable from this node");
		return -1;
	}
	return 0;
}

long long session_used_bytes(int root_fd)
{
	struct statvfs sv;

	if (fstatvfs(root_fd, &sv) < 0)
		return 0;
	return (long long)(sv.f_blocks - sv.f_bfree) * (long long)sv.f_frsize;
}

void respond_workspace_full(struct request *r, int root_fd)
{
	struct json_object *d = json_object_new_object();
	long long used = session_used_bytes(root_fd);
	json_object_object_add(d, "max_workspace_mb", json_object_new_int64(cfg_int(CFG_WORKSPACE_CAP_MB)));
	json_object_object_add(d, "current_workspace_mb",
			       json_object_new_double((double)(used * 100 / (1024 * 1024)) / 100.0));
	respond_error(r, 507, "workspace_full", d,
		      "the workspace is full (cap %lld MB); nothing was written",
		      (long long)cfg_int(CFG_WORKSPACE_CAP_MB));
}
