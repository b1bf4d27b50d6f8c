/* admin.c: the administrators' read-only API (PRD §30): runs of every
 * user with filters and paging, one run in full, idempotency keys, usage
 * per user and summaries over a window. Admin role only; anyone else
 * gets 403. Every list query is served by an index (see
 * docs/operations.md). */
#include "router.h"
#include "../lib/crypto.h"
#include "../lib/log.h"
#include "../lib/util.h"

#include <stdio.h>
#include <string.h>

#define TS(col) "to_char(" col " AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')"

static bool admin_only(struct request *r)
{
	if (r->user.admin)
		return true;
	respond_error(r, 403, "forbidden", NULL, "the admin API needs an admin key");
	return false;
}

struct sqlbuf {
	char sql[4096];
	const char *params[32];
	char *owned[32];
	int n;
};

static void add_filter(struct sqlbuf *b, const char *fmt, char *value)
{
	char clause[256];
	b->owned[b->n] = value;
	b->params[b->n] = value;
	b->n++;
	(void)snprintf(clause, sizeof(clause), fmt, b->n);
	(void)strlcpy_ok(b->sql + strlen(b->sql), clause, sizeof(b->sql) - strlen(b->sql));
}

void h_admin_runs(struct request *r)
{
	static const struct { const char *q, *clause; } filters[] = {
		{ "user_id", " AND user_id = $%d" },
		{ "phase", " AND phase = $%d" },
		{ "runtime", " AND runtime = $%d" },
		{ "image_digest", " AND image_digest = $%d" },
		{ "base_image", " AND base_image = $%d" },
		{ "node_id", " AND node_id = $%d" },
		{ "q", " AND (base_image || ' ' || coalesce(message, '')) ILIKE '%%' || $%d || '%%'" },
		{ "started_at_from", " AND running_at >= $%d::timestamptz" },
		{ "started_at_to", " AND running_at <= $%d::timestamptz" },
		{ "finished_at_from", " AND finished_at >= $%d::timestamptz" },
		{ "finished_at_to", " AND finished_at <= $%d::timestamptz" },
	};
	struct sqlbuf b = { .n = 0 };
	int64_t limit = 50, offset = 0;
	const char *why, *order = "created_at DESC";
	_cleanup_free_ char *lim = NULL, *off = NULL, *sort = NULL;

	if (!admin_only(r))
		return;
	lim = req_query(r, "limit");
	off = req_query(r, "offset");
	sort = req_query(r, "sort");
	if ((lim && parse_i64(lim, 1, 200, &limit, &why) < 0) ||
	    (off && parse_i64(off, 0, 100000000, &offset, &why) < 0)) {
		respond_error(r, 400, "invalid_request", NULL,
			      "limit must be 1..200 and offset a non-negative integer");
		return;
	}
	if (sort) {
		static const struct { const char *name, *sql; } sorts[] = {
			{ "started_at:desc", "running_at DESC NULLS LAST" },
			{ "started_at:asc", "running_at ASC NULLS LAST" },
			{ "finished_at:desc", "finished_at DESC NULLS LAST" },
			{ "finished_at:asc", "finished_at ASC NULLS LAST" },
			{ "created_at:desc", "created_at DESC" },
			{ "created_at:asc", "created_at ASC" },
		};
		order = NULL;
		for (size_t i = 0; i < ARRAY_SIZE(sorts); i++)
			if (strcmp(sort, sorts[i].name) == 0)
				order = sorts[i].sql;
		if (!order) {
			respond_error(r, 400, "invalid_request", log_fields("field", "sort", NULL),
				      "sort is one of started_at, finished_at, created_at with :asc or :desc");
			return;
		}
	}
	(void)strlcpy_ok(b.sql, " FROM runs WHERE true", sizeof(b.sql));
	for (size_t i = 0; i < ARRAY_SIZE(filters); i++) {
		char *v = req_query(r, filters[i].q);
		if (!v)
			continue;
		add_filter(&b, filters[i].clause, v);
	}
	char sql[10240], nums[2][24];
	(void)snprintf(nums[0], sizeof(nums[0]), "%lld", (long long)limit);
	(void)snprintf(nums[1], sizeof(nums[1]), "%lld", (long long)offset);
	b.params[b.n] = nums[0];
	b.params[b.n + 1] = nums[1];
	(void)snprintf(sql, sizeof(sql),
		       "SELECT coalesce(json_agg(x.j), '[]'::json)::text, "
		       " (SELECT count(*) %s) FROM ("
		       " SELECT json_build_object('id', id, 'user_id', user_id, 'spec_version', spec_version,"
		       "  'runtime', runtime, 'runtime_version', runtime_version, 'base_image', base_image,"
		       "  'phase', phase, 'reason_code', reason_code, 'exit_code', exit_code,"
		       "  'created_at', " TS("created_at") ", 'started_at', " TS("running_at") ","
		       "  'finished_at', " TS("finished_at") ", 'image_digest', image_digest,"
		       "  'policy_hash', policy_hash, 'node_id', node_id) AS j"
		       " %s ORDER BY %s LIMIT $%d::int OFFSET $%d::int) x",
		       b.sql, b.sql, order, b.n + 1, b.n + 2);
	PGresult *res = db_exec(r->db, sql, b.n + 2, b.params);
	for (int i = 0; i < b.n; i++)
		free(b.owned[i]);
	if (!res) {
		if (strncmp(db_sqlstate(r->db), "22", 2) == 0)
			respond_error(r, 400, "invalid_request", NULL,
				      "a filter value is malformed (timestamps are ISO 8601)");
		else
			respond_db_error(r);
		return;
	}
	respond_page(r, PQgetvalue(res, 0, 0), atoll(PQgetvalue(res, 0, 1)), limit, offset);
	PQclear(res);
}

void h_admin_run(struct request *r)
{
	const char *id = r->params[0];

	if (!admin_only(r))
		return;
	_cleanup_pgres_ PGresult *res = run_lookup(r, id,
		"json_build_object('id', id, 'user_id', user_id, 'session_id', session_id,"
		" 'spec_version', spec_version, 'runtime', runtime, 'runtime_version', runtime_version,"
		" 'base_image', base_image, 'image_digest', image_digest, 'phase', phase,"
		" 'exit_code', exit_code, 'reason_code', reason_code, 'message', message,"
		" 'created_at', " TS("created_at") ", 'started_at', " TS("running_at") ","
		" 'finished_at', " TS("finished_at") ", 'policy_hash', policy_hash,"
		" 'node_id', node_id, 'attempt', attempt, 'source', source, 'request_id', request_id,"
		" 'resource_usage', resource_usage, 'artifacts_truncated', artifacts_truncated,"
		" 'artifacts_expired_at', " TS("artifacts_expired_at") ","
		" 'artifacts', coalesce((SELECT json_agg(json_build_object('path', a.path, 'type', a.type,"
		"   'size', a.size, 'target', a.target,"
		"   'download_url', CASE WHEN a.type = 'file' AND artifacts_expired_at IS NULL THEN"
		"     '/api/v1/sandbox/runs/' || id || '/artifacts/' || a.path END) ORDER BY a.path)"
		"   FROM artifacts a WHERE a.run_id = runs.id), '[]'::json))::text", NULL);
	if (!res)
		return;
	respond_json(r, 200, json_tokener_parse(PQgetvalue(res, 0, 0)));
}

static int64_t query_int(struct request *r, const char *name, int64_t def, int64_t min,
			 int64_t max, bool *bad)
{
	_cleanup_free_ char *v = req_query(r, name);
	int64_t out = def;
	const char *why;

	if (v && parse_i64(v, min, max, &out, &why) < 0)
		*bad = true;
	return out;
}

/* Idempotency keys (PRD §30): endpoint runs|sessions|any, user_id,
 * limit, offset. */
void h_admin_idempotency(struct request *r)
{
	bool bad = false;
	_cleanup_free_ char *endpoint = req_query(r, "endpoint");
	_cleanup_free_ char *user = req_query(r, "user_id");
	char lim[24], off[24];

	if (!admin_only(r))
		return;
	int64_t limit = query_int(r, "limit", 50, 1, 200, &bad);
	int64_t offset = query_int(r, "offset", 0, 0, 100000000, &bad);
	if (bad || (endpoint && strcmp(endpoint, "runs") && strcmp(endpoint, "sessions") &&
		    strcmp(endpoint, "any"))) {
		respond_error(r, 400, "invalid_request", NULL,
			      "endpoint is runs, sessions or any; limit 1..200; offset >= 0");
		return;
	}
	(void)snprintf(lim, sizeof(lim), "%lld", (long long)limit);
	(void)snprintf(off, sizeof(off), "%lld", (long long)offset);
	const char *p[] = { endpoint && strcmp(endpoint, "any") ? endpoint : NULL, user, lim, off };
	_cleanup_pgres_ PGresult *res = db_exec(
		r->db,
		"SELECT coalesce(json_agg(json_build_object('endpoint', endpoint, 'user_key', user_id,"
		"  'user_id', user_id, 'key', key, 'object_id', object_id, 'status', status,"
		"  'created_at', " TS("created_at") ") ORDER BY created_at DESC), '[]')::text FROM ("
		" SELECT * FROM idempotency WHERE ($1::text IS NULL OR endpoint = $1)"
		"  AND ($2::text IS NULL OR user_id = $2)"
		" ORDER BY created_at DESC LIMIT $3::int OFFSET $4::int) t",
		4, p);
	if (!res) {
		respond_db_error(r);
		return;
	}
	struct json_object *o = json_object_new_object();
	json_object_object_add(o, "items", json_tokener_parse(PQgetvalue(res, 0, 0)));
	json_object_object_add(o, "limit", json_object_new_int64(limit));
	json_object_object_add(o, "offset", json_object_new_int64(offset));
	respond_json(r, 200, o);
}

/* Per-user artifact bytes (PRD §30), top N, with runs and log bytes. */
void h_admin_usage(struct request *r)
{
	bool bad = false;
	char lim[24];

	if (!admin_only(r))
		return;
	int64_t limit = query_int(r, "limit", 50, 1, 200, &bad);
	if (bad) {
		respond_error(r, 400, "invalid_request", NULL, "limit is 1..200");
		return;
	}
	(void)snprintf(lim, sizeof(lim), "%lld", (long long)limit);
	const char *p[] = { lim };
	_cleanup_pgres_ PGresult *res = db_exec(
		r->db,
		"SELECT coalesce(json_agg(t ORDER BY t.artifact_bytes DESC, t.runs DESC), '[]')::text "
		"FROM (SELECT user_id, sum(artifact_bytes)::bigint AS artifact_bytes,"
		"  count(*) AS runs, sum(log_bytes)::bigint AS log_bytes,"
		"  round(sum(coalesce((resource_usage->>'cpu_time_sec')::numeric, 0)), 3) AS cpu_time_sec"
		"  FROM runs GROUP BY user_id ORDER BY 2 DESC, 3 DESC LIMIT $1::int) t",
		1, p);
	if (!res) {
		respond_db_error(r);
		return;
	}
	struct json_object *o = json_object_new_object();
	json_object_object_add(o, "items", json_tokener_parse(PQgetvalue(res, 0, 0)));
	respond_json(r, 200, o);
}

/* Totals over a window (from, to; default the last 24 h), by runtime and
 * top users (PRD v0.3 aggregates). */
void h_admin_usage_summary(struct request *r)
{
	_cleanup_free_ char *from = req_query(r, "from");
	_cleanup_free_ char *to = req_query(r, "to");

	if (!admin_only(r))
		return;
	const char *p[] = { from, to };
	_cleanup_pgres_ PGresult *res = db_exec(
		r->db,
		"WITH w AS (SELECT coalesce($1::timestamptz, now() - interval '24 hours') AS f,"
		"                  coalesce($2::timestamptz, now()) AS t),"
		" x AS (SELECT runs.* FROM runs, w WHERE created_at >= w.f AND created_at <= w.t) "
		"SELECT json_build_object("
		" 'window', (SELECT json_build_object('from', " TS("f") ", 'to', " TS("t") ") FROM w),"
		" 'totals', (SELECT json_build_object('runs', count(*),"
		"   'completed', count(*) FILTER (WHERE phase = 'completed'),"
		"   'failed', count(*) FILTER (WHERE phase = 'failed'),"
		"   'timed_out', count(*) FILTER (WHERE phase = 'timed_out'),"
		"   'killed', count(*) FILTER (WHERE phase = 'killed'),"
		"   'log_bytes', coalesce(sum(log_bytes), 0), 'artifact_bytes', coalesce(sum(artifact_bytes), 0))"
		"   FROM x),"
		" 'by_runtime', (SELECT coalesce(json_agg(b ORDER BY b.runs DESC), '[]') FROM ("
		"   SELECT runtime, count(*) AS runs, count(*) FILTER (WHERE phase = 'completed') AS completed,"
		"   coalesce(sum(log_bytes), 0) AS log_bytes, coalesce(sum(artifact_bytes), 0) AS artifact_bytes"
		"   FROM x GROUP BY runtime) b),"
		" 'top_users', (SELECT coalesce(json_agg(u ORDER BY u.runs DESC), '[]') FROM ("
		"   SELECT user_id, count(*) AS runs, coalesce(sum(artifact_bytes), 0) AS artifact_bytes"
		"   FROM x GROUP BY user_id ORDER BY 2 DESC LIMIT 10) u)"
		")::text",
		2, p);
	if (!res) {
		if (strncmp(db_sqlstate(r->db), "22", 2) == 0)
			respond_error(r, 400, "invalid_request", NULL, "from and to are ISO 8601 timestamps");
		else
			respond_db_error(r);
		return;
	}
	respond_json(r, 200, json_tokener_parse(PQgetvalue(res, 0, 0)));
}
