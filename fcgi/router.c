/* router.c: method + path → handler, with {param} captures; 404 for an
 * unknown path and 405 (with Allow) for a known path and a wrong method. */
#include "router.h"
#include "metrics.h"
#include "../lib/log.h"
#include "../lib/util.h"

#include <stdio.h>
#include <string.h>

#define API "/api/v1/sandbox"

static const struct route {
	const char *method;
	const char *pattern;
	handler_fn fn;
	bool auth;
} routes[] = {
	{ "GET", API "/healthz", h_healthz, false },
	{ "GET", API "/readyz", h_readyz, false },
	{ "GET", API "/runtimes", h_runtimes, true },
	{ "POST", API "/runs", h_runs_create, true },
	{ "GET", API "/runs", h_runs_list, true },
	{ "GET", API "/runs/{id}", h_run_get, true },
	{ "GET", API "/runs/{id}/logs", h_run_logs, true },
	{ "POST", API "/runs/{id}/cancel", h_run_cancel, true },
	{ "GET", API "/runs/{id}/artifacts", h_artifacts_list, true },
	{ "GET", API "/runs/{id}/artifacts/{*}", h_artifact_get, true },
	{ "POST", API "/sessions", h_sessions_create, true },
	{ "GET", API "/sessions", h_sessions_list, true },
	{ "GET", API "/sessions/{id}", h_session_get, true },
	{ "DELETE", API "/sessions/{id}", h_session_delete, true },
	{ "GET", API "/sessions/{id}/files", h_files_list, true },
	{ "POST", API "/sessions/{id}/files", h_files_upload, true },
	{ "GET", API "/sessions/{id}/files/{*}", h_file_get, true },
	{ "PUT", API "/sessions/{id}/files/{*}", h_file_put, true },
	{ "DELETE", API "/sessions/{id}/files/{*}", h_file_delete, true },
	{ "GET", API "/admin/runs", h_admin_runs, true },
	{ "GET", API "/admin/runs/{id}", h_admin_run, true },
	{ "GET", API "/admin/idempotency", h_admin_idempotency, true },
	{ "GET", API "/admin/usage", h_admin_usage, true },
	{ "GET", API "/admin/usage/summary", h_admin_usage_summary, true },
	{ "GET", API "/admin/metrics", h_admin_metrics, true },
	/* nginx serves it at /metrics (loopback only by default); an admin
	 * key or SANDBOX_METRICS_TOKEN is still required. */
	{ "GET", API "/metrics", h_metrics_prometheus, false },
	/* Authenticates itself: an API key or a signed token. */
	{ "GET", API "/runs/{id}/stream", h_run_stream, false },
};

/* Match path against pattern segment by segment; "{x}" captures one
 * non-empty segment. Captures point into a copy owned by the request. */
static bool match(const char *pattern, const char *path, struct request *r,
		  bool capture)
{
	const char *p = pattern, *s = path;
	int n = 0;

	while (*p && *s) {
		if (strcmp(p, "{*}") == 0) { /* the rest, slashes and all */
			if (n >= MAX_PATH_PARAMS)
				return false;
			if (capture)
				r->params[n] = xstrdup(s);
			n++;
			p += 3;
			s += strlen(s);
			break;
		}
		if (*p == '{') {
			const char *pe = strchr(p, '}');
			const char *se = strchr(s, '/');
			size_t len = se ? (size_t)(se - s) : strlen(s);
			if (!pe || len == 0 || n >= MAX_PATH_PARAMS)
				return false;
			if (capture) {
				char *v = xcalloc(1, len + 1);
				memcpy(v, s, len);
				r->params[n] = v;
			}
			n++;
			p = pe + 1;
			s += len;
			continue;
		}
		if (*p != *s)
			return false;
		p++;
		s++;
	}
	if (*p || *s)
		return false;
	if (capture)
		r->nparams = n;
	return true;
}

const char *route_pattern(int i)
{
	return i >= 0 && (size_t)i < ARRAY_SIZE(routes) ? routes[i].pattern + strlen(API) : NULL;
}

void route_request(struct request *r)
{
	char allow[64] = "";
	bool path_known = false;

	for (size_t i = 0; i < ARRAY_SIZE(routes); i++) {
		const struct route *rt = &routes[i];
		if (!match(rt->pattern, r->path, r, false))
			continue;
		path_known = true;
		if (strcmp(rt->method, r->method) != 0 &&
		    !(strcmp(r->method, "HEAD") == 0 &&
		      strcmp(rt->method, "GET") == 0)) {
			if (!strstr(allow, rt->method)) {
				size_t l = strlen(allow);
				(void)snprintf(allow + l, sizeof(allow) - l, "%s%s",
					       l ? ", " : "", rt->method);
			}
			continue;
		}
		(void)match(rt->pattern, r->path, r, true);
		r->route = (int)i;
		if (rt->auth && auth_authenticate(r) < 0)
			return;
		rt->fn(r);
		return;
	}
	if (path_known) {
		char hdr[96];
		(void)snprintf(hdr, sizeof(hdr), "Allow: %s\r\n", allow);
		struct json_object *d = json_object_new_object();
		json_object_object_add(d, "allow", json_object_new_string(allow));
		json_object_object_add(d, "method", json_object_new_string(r->method));
		respond_error_h(r, 405, hdr, "method_not_allowed", d,
				"method %s is not allowed on %s", r->method, r->path);
		return;
	}
	respond_error(r, 404, "not_found",
		      log_fields("path", r->path, NULL),
		      "no such endpoint: %s %s", r->method, r->path);
}
