/* auth.c: API keys, accepted as `X-API-KEY: <key>` or
 * `Authorization: Bearer <key>`. Only SHA-256(key) is stored, so a
 * database leak does not leak usable keys. */
#include "router.h"
#include "../lib/crypto.h"
#include "../lib/log.h"
#include "../lib/util.h"

#include <ctype.h>
#include <string.h>
#include <strings.h>

#define MAX_KEY_LEN 256

static const char *presented_key(struct request *r)
{
	const char *k = req_param(r, "HTTP_X_API_KEY");
	const char *a;

	if (k && *k)
		return k;
	a = req_param(r, "HTTP_AUTHORIZATION");
	if (a && strncasecmp(a, "Bearer ", 7) == 0) {
		a += 7;
		while (*a == ' ')
			a++;
		return a;
	}
	return NULL;
}

static bool key_shape_ok(const char *k)
{
	size_t n = strlen(k);

	if (n == 0 || n > MAX_KEY_LEN)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isgraph((unsigned char)k[i]))
			return false;
	return true;
}

int auth_authenticate(struct request *r)
{
	const char *key = presented_key(r);
	_cleanup_pgres_ PGresult *res = NULL;
	char hash[65];

	if (!key) {
		respond_error_h(r, 401, "WWW-Authenticate: Bearer\r\n",
				"unauthorized", NULL,
				"missing API key: send X-API-KEY or "
				"Authorization: Bearer");
		return -1;
	}
	if (!key_shape_ok(key))
		goto bad;
	sha256_hex(key, strlen(key), hash);
	const char *params[] = { hash };
	res = db_exec(
		r->db,
		"SELECT u.id, u.role, k.id, "
		"  k.last_used_at IS NULL OR k.last_used_at < now() - interval '60 seconds' "
		"FROM api_keys k JOIN users u ON u.id = k.user_id "
		"WHERE k.key_hash = $1 AND k.revoked_at IS NULL "
		"  AND u.disabled_at IS NULL",
		1, params);
	if (!res) {
		respond_db_error(r);
		return -1;
	}
	if (PQntuples(res) != 1)
		goto bad;
	(void)strlcpy_ok(r->user.id, PQgetvalue(res, 0, 0), sizeof(r->user.id));
	r->user.admin = strcmp(PQgetvalue(res, 0, 1), "admin") == 0;
	(void)strlcpy_ok(r->user.key_id, PQgetvalue(res, 0, 2),
			 sizeof(r->user.key_id));
	r->authenticated = true;
	if (PQgetvalue(res, 0, 3)[0] == 't') {
		/* Recorded at most once a minute per key: cheap, and enough
		 * for an operator to see which keys are in use. */
		const char *p2[] = { r->user.key_id };
		(void)db_command(r->db, "UPDATE api_keys SET last_used_at = now() WHERE id = $1",
				 1, p2);
	}
	return 0;
bad:
	respond_error_h(r, 401, "WWW-Authenticate: Bearer\r\n", "unauthorized",
			NULL, "invalid or revoked API key");
	return -1;
}
