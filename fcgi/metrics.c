/* metrics.c: see metrics.h. */
#include "metrics.h"
#include "router.h"
#include "../lib/config.h"
#include "../lib/crypto.h"
#include "../lib/log.h"
#include "../lib/util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define MAX_ROUTES 64
static const int statuses[] = { 200, 201, 202, 204, 206, 400, 401, 403, 404, 405, 409,
				413, 415, 416, 422, 426, 429, 500, 502, 503, 507, 0 };
#define NSTATUS (sizeof(statuses) / sizeof(statuses[0]))
static const double lat_buckets[] = { 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
				      0.25, 0.5, 1, 2.5, 5, 10 };
#define NBUCKETS (sizeof(lat_buckets) / sizeof(lat_buckets[0]))
static const char *const upload_kinds[UPLOAD_KINDS] = { "multipart", "tar", "zip", "put" };

struct route_stat {
	uint64_t count, sum_us;
	uint64_t buckets[NBUCKETS]; /* not cumulative; summed when rendered */
};

struct shared {
	struct route_stat rs[MAX_ROUTES + 1][NSTATUS];
	uint64_t upload_bytes[UPLOAD_KINDS], upload_files[UPLOAD_KINDS];
	uint64_t queue_full;
};

static struct shared *shm;

int metrics_init(void)
{
	void *p = mmap(NULL, sizeof(struct shared), PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return -1;
	shm = p;
	return 0;
}

static void add(uint64_t *c, uint64_t v)
{
	__atomic_fetch_add(c, v, __ATOMIC_RELAXED);
}

void metrics_request(int route, int status, int64_t duration_us)
{
	size_t s = NSTATUS - 1;

	if (!shm)
		return;
	if (route < 0 || route >= MAX_ROUTES)
		route = MAX_ROUTES; /* unmatched */
	for (size_t i = 0; i + 1 < NSTATUS; i++)
		if (statuses[i] == status)
			s = i;
	struct route_stat *st = &shm->rs[route][s];
	add(&st->count, 1);
	add(&st->sum_us, duration_us > 0 ? (uint64_t)duration_us : 0);
	for (size_t b = 0; b < NBUCKETS; b++) {
		if ((double)duration_us / 1e6 <= lat_buckets[b]) {
			add(&st->buckets[b], 1);
			break;
		}
	}
}

void metrics_upload(enum upload_kind kind, int64_t bytes, int64_t files)
{
	if (!shm || kind >= UPLOAD_KINDS)
		return;
	add(&shm->upload_bytes[kind], (uint64_t)bytes);
	add(&shm->upload_files[kind], (uint64_t)files);
}

void metrics_queue_full(const char *runtime)
{
	(void)runtime;
	if (shm)
		add(&shm->queue_full, 1);
}

/* ---- collection: {"name": [{"labels": {...}, "value": v}, ...]} ---- */

static void series(struct json_object *m, const char *name, struct json_object *labels,
		   double value)
{
	struct json_object *arr = NULL, *o = json_object_new_object();

	if (!json_object_object_get_ex(m, name, &arr)) {
		arr = json_object_new_array();
		json_object_object_add(m, name, arr);
	}
	json_object_object_add(o, "labels", labels ? labels : json_object_new_object());
	json_object_object_add(o, "value", json_object_new_double(value));
	json_object_array_add(arr, o);
}

static struct json_object *lbl(const char *k1, const char *v1, const char *k2, const char *v2)
{
	struct json_object *o = json_object_new_object();
	if (k1)
		json_object_object_add(o, k1, json_object_new_string(v1));
	if (k2)
		json_object_object_add(o, k2, json_object_new_string(v2));
	return o;
}

static void collect_api(struct json_object *m)
{
	char le[32], st[8];

	for (int r = 0; shm && r <= MAX_ROUTES; r++) {
		const char *route = r < MAX_ROUTES ? route_pattern(r) : "unmatched";
		if (!route)
			continue;
		for (size_t s = 0; s < NSTATUS; s++) {
			struct route_stat *x = &shm->rs[r][s];
			uint64_t count = __atomic_load_n(&x->count, __ATOMIC_RELAXED), cum = 0;
			if (count == 0)
				continue;
			if (statuses[s])
				(void)snprintf(st, sizeof(st), "%d", statuses[s]);
			else
				(void)snprintf(st, sizeof(st), "other");
			series(m, "sandbox_api_requests_total", lbl("route", route, "status", st),
			       (double)count);
			for (size_t b = 0; b < NBUCKETS; b++) {
				cum += __atomic_load_n(&x->buckets[b], __ATOMIC_RELAXED);
				(void)snprintf(le, sizeof(le), "%g", lat_buckets[b]);
				struct json_object *l = lbl("route", route, "status", st);
				json_object_object_add(l, "le", json_object_new_string(le));
				series(m, "sandbox_api_request_duration_seconds_bucket", l, (double)cum);
			}
			struct json_object *l = lbl("route", route, "status", st);
			json_object_object_add(l, "le", json_object_new_string("+Inf"));
			series(m, "sandbox_api_request_duration_seconds_bucket", l, (double)count);
			series(m, "sandbox_api_request_duration_seconds_sum",
			       lbl("route", route, "status", st),
			       (double)__atomic_load_n(&x->sum_us, __ATOMIC_RELAXED) / 1e6);
			series(m, "sandbox_api_request_duration_seconds_count",
			       lbl("route", route, "status", st), (double)count);
		}
	}
	for (int k = 0; shm && k < UPLOAD_KINDS; k++) {
		series(m, "sandbox_upload_bytes_total", lbl("kind", upload_kinds[k], NULL, NULL),
		       (double)__atomic_load_n(&shm->upload_bytes[k], __ATOMIC_RELAXED));
		series(m, "sandbox_upload_files_total", lbl("kind", upload_kinds[k], NULL, NULL),
		       (double)__atomic_load_n(&shm->upload_files[k], __ATOMIC_RELAXED));
	}
	struct json_object *l = lbl("component", "api", "reason", "queue_full");
	json_object_object_add(l, "runtime", json_object_new_string(cfg_str(CFG_DEFAULT_RUNTIME)));
	series(m, "sandbox_queue_full_total", l,
	       shm ? (double)__atomic_load_n(&shm->queue_full, __ATOMIC_RELAXED) : 0);
}

/* -1 on a database error. */
static int collect_db(struct request *r, struct json_object *m)
{
	_cleanup_pgres_ PGresult *c = db_exec(
		r->db,
		"SELECT name, labels::text, value FROM ("
		"  SELECT name, labels, value, CASE WHEN labels->>'le' = '+Inf' THEN 'Infinity'::float8"
		"    ELSE (labels->>'le')::float8 END AS le FROM metric_counters) t "
		"ORDER BY name, labels - 'le', le",
		0, NULL);
	_cleanup_pgres_ PGresult *h = db_exec(
		r->db, "SELECT name, labels::text, array_to_json(counts)::text, sum, count "
		       "FROM metric_hist ORDER BY name, labels::text",
		0, NULL);
	_cleanup_pgres_ PGresult *g = db_exec(
		r->db,
		"SELECT (SELECT count(*) FROM runs WHERE phase = 'queued'),"
		" (SELECT count(*) FROM runs WHERE phase = 'starting'),"
		" (SELECT count(*) FROM runs WHERE phase = 'running'),"
		" (SELECT count(*) FROM sessions WHERE state IN ('provisioning', 'ready')),"
		" coalesce(sum((stats->>'ws_connections_opened')::float8), 0),"
		" coalesce(sum((stats->>'ws_heartbeats_sent')::float8), 0),"
		" coalesce(sum((stats->>'ws_disconnects')::float8), 0),"
		" coalesce(sum((stats->>'ws_queue_drops')::float8), 0),"
		" coalesce(sum((stats->>'ws_clients')::float8) FILTER (WHERE heartbeat_at >"
		"   now() - make_interval(secs => $1::int)), 0),"
		" count(*) FILTER (WHERE heartbeat_at > now() - make_interval(secs => $1::int)) "
		"FROM nodes",
		1, (const char *[]){ "30" });
	if (!c || !g || !h)
		return -1;
	/* Histograms: one row each, expanded into _bucket/_sum/_count. */
	static const char *const bounds[] = { "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1",
					      "2.5", "5", "10", "30", "60", "300", "3600" };
	for (int i = 0; i < PQntuples(h); i++) {
		char n[160];
		const char *name = PQgetvalue(h, i, 0);
		struct json_object *counts = json_tokener_parse(PQgetvalue(h, i, 2));
		(void)snprintf(n, sizeof(n), "%s_bucket", name);
		for (size_t b = 0; b < ARRAY_SIZE(bounds); b++) {
			struct json_object *l = json_tokener_parse(PQgetvalue(h, i, 1));
			json_object_object_add(l, "le", json_object_new_string(bounds[b]));
			series(m, n, l, json_object_get_double(json_object_array_get_idx(counts, b)));
		}
		struct json_object *l = json_tokener_parse(PQgetvalue(h, i, 1));
		json_object_object_add(l, "le", json_object_new_string("+Inf"));
		series(m, n, l, atof(PQgetvalue(h, i, 4)));
		(void)snprintf(n, sizeof(n), "%s_sum", name);
		series(m, n, json_tokener_parse(PQgetvalue(h, i, 1)), atof(PQgetvalue(h, i, 3)));
		(void)snprintf(n, sizeof(n), "%s_count", name);
		series(m, n, json_tokener_parse(PQgetvalue(h, i, 1)), atof(PQgetvalue(h, i, 4)));
		json_object_put(counts);
	}
	for (int i = 0; i < PQntuples(c); i++)
		series(m, PQgetvalue(c, i, 0), json_tokener_parse(PQgetvalue(c, i, 1)),
		       atof(PQgetvalue(c, i, 2)));
	static const char *const phases[] = { "queued", "starting", "running" };
	for (int i = 0; i < 3; i++)
		series(m, "sandbox_runs", lbl("phase", phases[i], NULL, NULL), atof(PQgetvalue(g, 0, i)));
	series(m, "sandbox_sessions_live", NULL, atof(PQgetvalue(g, 0, 3)));
	series(m, "sandbox_ws_connections_opened_total", lbl("component", "ws", NULL, NULL),
	       atof(PQgetvalue(g, 0, 4)));
	series(m, "sandbox_ws_heartbeats_sent_total", lbl("component", "ws", NULL, NULL),
	       atof(PQgetvalue(g, 0, 5)));
	series(m, "sandbox_ws_disconnects_total", lbl("component", "ws", NULL, NULL),
	       atof(PQgetvalue(g, 0, 6)));
	series(m, "sandbox_ws_queue_drops_total", lbl("component", "ws", "reason", "slow_consumer"),
	       atof(PQgetvalue(g, 0, 7)));
	series(m, "sandbox_ws_clients", NULL, atof(PQgetvalue(g, 0, 8)));
	series(m, "sandbox_supervisors_live", NULL, atof(PQgetvalue(g, 0, 9)));
	return 0;
}

/* ---- Prometheus text ---- */

static const struct family {
	const char *name, *type, *help;
} families[] = {
	{ "sandbox_runs_started_total", "counter", "Runs accepted (POST /runs), by runtime." },
	{ "sandbox_runs_completed_total", "counter", "Runs that reached a terminal phase, by runtime, outcome (phase) and reason." },
	{ "sandbox_run_duration_seconds", "histogram", "Execution time of ended runs (running to terminal)." },
	{ "sandbox_queue_wait_seconds", "histogram", "Time from POST /runs to being claimed by a supervisor." },
	{ "sandbox_run_start_latency_seconds", "histogram", "Time from POST /runs to the command running." },
	{ "sandbox_queue_full_total", "counter", "Runs refused because the queue was full." },
	{ "sandbox_queue_ttl_expired_total", "counter", "Queued runs that expired (queue_ttl_sec)." },
	{ "sandbox_sessions_created_total", "counter", "Sessions created, by runtime." },
	{ "sandbox_upload_bytes_total", "counter", "Bytes received in uploads, by kind." },
	{ "sandbox_upload_files_total", "counter", "Files written by uploads, by kind." },
	{ "sandbox_log_bytes_total", "counter", "Output bytes recorded from ended runs, by runtime." },
	{ "sandbox_log_truncations_total", "counter", "Runs whose output hit max_log_bytes." },
	{ "sandbox_artifact_bytes_total", "counter", "Artifact bytes captured, by runtime." },
	{ "sandbox_run_cpu_seconds_total", "counter", "CPU seconds used by ended runs (cgroup accounting)." },
	{ "sandbox_ws_connections_opened_total", "counter", "Stream connections accepted (sum over supervisors since their start)." },
	{ "sandbox_ws_heartbeats_sent_total", "counter", "Heartbeat frames sent to stream clients." },
	{ "sandbox_ws_disconnects_total", "counter", "Stream clients gone." },
	{ "sandbox_ws_queue_drops_total", "counter", "Stream clients dropped for not reading." },
	{ "sandbox_ws_clients", "gauge", "Stream clients connected now." },
	{ "sandbox_runs", "gauge", "Runs in a non-terminal phase now." },
	{ "sandbox_sessions_live", "gauge", "Sessions provisioning or ready now." },
	{ "sandbox_supervisors_live", "gauge", "Supervisors with a fresh heartbeat." },
	{ "sandbox_api_requests_total", "counter", "API requests answered, by route and status." },
	{ "sandbox_api_request_duration_seconds", "histogram", "API request handling time, by route and status." },
};

static void put_escaped(FCGX_Stream *out, const char *s)
{
	for (; *s; s++) {
		if (*s == '\\')
			FCGX_PutS("\\\\", out);
		else if (*s == '"')
			FCGX_PutS("\\\"", out);
		else if (*s == '\n')
			FCGX_PutS("\\n", out);
		else
			FCGX_PutChar(*s, out);
	}
}

static void put_series(FCGX_Stream *out, const char *name, struct json_object *arr)
{
	for (size_t i = 0; i < json_object_array_length(arr); i++) {
		struct json_object *o = json_object_array_get_idx(arr, i), *l, *v;
		json_object_object_get_ex(o, "labels", &l);
		json_object_object_get_ex(o, "value", &v);
		FCGX_PutS(name, out);
		if (json_object_object_length(l) > 0) {
			bool first = true;
			FCGX_PutChar('{', out);
			json_object_object_foreach(l, k, lv)
			{
				FCGX_FPrintF(out, "%s%s=\"", first ? "" : ",", k);
				put_escaped(out, json_object_get_string(lv));
				FCGX_PutChar('"', out);
				first = false;
			}
			FCGX_PutChar('}', out);
		}
		double d = json_object_get_double(v);
		if (d == floor(d) && fabs(d) < 1e15)
			FCGX_FPrintF(out, " %.0f\n", d);
		else
			FCGX_FPrintF(out, " %.6f\n", d);
	}
}

static struct json_object *collect(struct request *r)
{
	struct json_object *m = json_object_new_object();

	if (collect_db(r, m) < 0) {
		json_object_put(m);
		respond_db_error(r);
		return NULL;
	}
	collect_api(m);
	return m;
}

void h_metrics_prometheus(struct request *r)
{
	const char *token = cfg_str(CFG_METRICS_TOKEN), *auth = req_param(r, "HTTP_AUTHORIZATION");
	const char *ru = req_param(r, "REQUEST_URI");
	char expect[512];

	/* Only through nginx's /metrics location, which holds the address
	 * allow-list; not as a public API path. */
	if (!ru || strncmp(ru, "/metrics", 8) != 0 || (ru[8] && ru[8] != '?')) {
		respond_error(r, 404, "not_found", NULL, "no such endpoint: GET %s", r->path);
		return;
	}
	(void)snprintf(expect, sizeof(expect), "Bearer %s", token);
	bool by_token = *token && auth && secure_streq(auth, expect);
	if (!by_token) {
		if (auth_authenticate(r) < 0)
			return;
		if (!r->user.admin) {
			respond_error(r, 403, "forbidden", NULL,
				      "metrics need an admin key or SANDBOX_METRICS_TOKEN");
			return;
		}
	}
	struct json_object *m = collect(r);
	if (!m)
		return;
	r->status = 200;
	FCGX_FPrintF(r->fcgx->out, "Status: 200 OK\r\n"
				   "Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
				   "Cache-Control: no-store\r\n\r\n");
	for (size_t f = 0; f < ARRAY_SIZE(families); f++) {
		const struct family *fam = &families[f];
		FCGX_FPrintF(r->fcgx->out, "# HELP %s %s\n# TYPE %s %s\n", fam->name, fam->help,
			     fam->name, fam->type);
		struct json_object *arr;
		if (strcmp(fam->type, "histogram") == 0) {
			static const char *const sfx[] = { "_bucket", "_sum", "_count" };
			for (size_t i = 0; i < 3; i++) {
				char n[128];
				(void)snprintf(n, sizeof(n), "%s%s", fam->name, sfx[i]);
				if (json_object_object_get_ex(m, n, &arr))
					put_series(r->fcgx->out, n, arr);
			}
		} else if (json_object_object_get_ex(m, fam->name, &arr)) {
			put_series(r->fcgx->out, fam->name, arr);
		}
	}
	json_object_put(m);
}

void h_admin_metrics(struct request *r)
{
	if (!r->user.admin) {
		respond_error(r, 403, "forbidden", NULL, "the admin API needs an admin key");
		return;
	}
	struct json_object *m = collect(r);
	if (m)
		respond_json(r, 200, m);
}
