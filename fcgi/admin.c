/* admin.c: the administrators' read-only API (PRD §30): runs of every
 * user with filters and paging, one run in full. Admin role only; anyone
 * else gets 403. Every list query is served by an index (see
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
		{ "q", " AND (base_image ILIKE '%%' || $%d || '%%' OR message ILIKE '%%' || $%d || '%%')" },
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
		if (strcmp(filters[i].q, "q") == 0) {
			/* The same value twice. */
			char clause[256];
			b.owned[b.n] = v;
			b.params[b.n] = v;
			b.n++;
			(void)snprintf(clause, sizeof(clause), filters[i].clause, b.n, b.n);
			(void)strlcpy_ok(b.sql + strlen(b.sql), clause, sizeof(b.sql) - strlen(b.sql));
			continue;
		}
		add_filter(&b, filters[i].clause, v);
	}
	char sql[6144], nums[2][24];
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
	struct json_object *o = json_object_new_object();
	int64_t total = atoll(PQgetvalue(res, 0, 1));
	json_object_object_add(o, "items", json_tokener_parse(PQgetvalue(res, 0, 0)));
	json_object_object_add(o, "total", json_object_new_int64(total));
	json_object_object_add(o, "limit", json_object_new_int64(limit));
	json_object_object_add(o, "offset", json_object_new_int64(offset));
	json_object_object_add(o, "has_more", json_object_new_boolean(offset + limit < total));
	PQclear(res);
	respond_json(r, 200, o);
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
		" 'resource_usage', resource_usage, 'artifacts', '[]'::json)::text", NULL);
	if (!res)
		return;
	respond_json(r, 200, json_tokener_parse(PQgetvalue(res, 0, 0)));
}
