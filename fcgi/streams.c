/* streams.c: GET /runs/{id}/stream. sandbox-api decides who may watch a
 * run (an API key, or a signed token made for this run that has not
 * expired) and answers with X-Accel-Redirect to nginx's internal location
 * that proxies the WebSocket upgrade to the supervisor holding the run.
 * The token and the key never reach the supervisor. */
#include "router.h"
#include "../lib/config.h"
#include "../lib/crypto.h"
#include "../lib/log.h"
#include "../lib/util.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

/* token = hex HMAC-SHA256(secret, "<run_id>\n<exp>"), exp RFC 3339 UTC. */
void stream_token(const char *run_id, const char *exp, char out[65])
{
	const char *secret = cfg_str(CFG_WS_SIGNING_SECRET);
	char msg[128];

	(void)snprintf(msg, sizeof(msg), "%s\n%s", run_id, exp);
	hmac_sha256_hex(secret, strlen(secret), msg, strlen(msg), out);
}

static bool parse_rfc3339(const char *s, time_t *out)
{
	struct tm tm;
	memset(&tm, 0, sizeof(tm));
	const char *end = strptime(s, "%Y-%m-%dT%H:%M:%SZ", &tm);
	if (!end || *end)
		return false;
	*out = timegm(&tm);
	return true;
}

/* 0: the token is valid for this run now; -1 after a 401. */
static int check_token(struct request *r, const char *run_id, const char *token,
		       const char *exp)
{
	char want[65];
	time_t t;

	if (!*cfg_str(CFG_WS_SIGNING_SECRET) || !exp || !parse_rfc3339(exp, &t)) {
		respond_error(r, 401, "unauthorized", NULL, "invalid stream token");
		return -1;
	}
	stream_token(run_id, exp, want);
	if (!secure_streq(want, token)) {
		respond_error(r, 401, "unauthorized", NULL, "invalid stream token");
		return -1;
	}
	if (t < time(NULL)) {
		respond_error(r, 401, "unauthorized",
			      log_fields("exp", exp, NULL),
			      "the stream token expired; get a fresh log_stream_url "
			      "from GET /runs/{id}");
		return -1;
	}
	return 0;
}

void h_run_stream(struct request *r)
{
	const char *id = r->params[0];
	_cleanup_free_ char *token = req_query(r, "token");
	_cleanup_free_ char *exp = req_query(r, "exp");
	_cleanup_free_ char *from = req_query(r, "from_seq");
	int64_t from_seq = 1;
	const char *why, *upgrade = req_param(r, "HTTP_UPGRADE");

	if (token) {
		if (check_token(r, id, token, exp) < 0)
			return;
	} else if (auth_authenticate(r) < 0) {
		return;
	}
	if (from && parse_i64(from, 1, INT64_MAX, &from_seq, &why) < 0) {
		respond_error(r, 400, "invalid_request", log_fields("field", "from_seq", NULL),
			      "from_seq must be a positive integer");
		return;
	}
	/* With a token the run is the token's; with a key it must be the
	 * caller's. Either way the answer for a stranger is 404. */
	_cleanup_pgres_ PGresult *res = run_lookup(r, id, "coalesce(node_id, '')",
						   r->authenticated ? r->user.id : NULL);
	if (!res)
		return;
	if (!upgrade || strcasecmp(upgrade, "websocket") != 0) {
		respond_error_h(r, 426, "Upgrade: websocket\r\n", "invalid_request", NULL,
				"this endpoint is a WebSocket: send Upgrade: websocket");
		return;
	}
	char hdr[256];
	(void)snprintf(hdr, sizeof(hdr),
		       "X-Accel-Redirect: /_stream/%s?from_seq=%lld\r\n", id,
		       (long long)from_seq);
	log_msg(LOG_LVL_INFO, log_fields("run_id", id, "auth", token ? "token" : "key", NULL),
		"stream authorized");
	respond_raw(r, 200, "text/plain", hdr, "", 0);
}
