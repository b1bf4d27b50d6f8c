/* idempotency.c: Idempotency-Key for POST /runs and /sessions (PRD
 * "Idempotency Semantics"). The key row is inserted first, inside the
 * caller's transaction, so concurrent duplicates block on the primary key
 * until the first commits and then replay its answer: race-free without
 * locks of our own. */
#include "idempotency.h"
#include "../lib/config.h"
#include "../lib/crypto.h"
#include "../lib/util.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_keys(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static void append(char **buf, size_t *len, size_t *cap, const char *s)
{
	size_t n = strlen(s);
	while (*len + n + 1 > *cap) {
		*cap = *cap ? *cap * 2 : 1024;
		char *nb = realloc(*buf, *cap);
		if (!nb)
			abort();
		*buf = nb;
	}
	memcpy(*buf + *len, s, n + 1);
	*len += n;
}

static void canon(struct json_object *o, char **buf, size_t *len, size_t *cap)
{
	switch (json_object_get_type(o)) {
	case json_type_object: {
		size_t n = (size_t)json_object_object_length(o), i = 0;
		const char **keys = xcalloc(n ? n : 1, sizeof(char *));
		json_object_object_foreach(o, k, v)
		{
			(void)v;
			keys[i++] = k;
		}
		qsort(keys, n, sizeof(char *), cmp_keys);
		append(buf, len, cap, "{");
		for (i = 0; i < n; i++) {
			struct json_object *ks = json_object_new_string(keys[i]), *val = NULL;
			if (i)
				append(buf, len, cap, ",");
			append(buf, len, cap, json_object_to_json_string_ext(ks, JSON_C_TO_STRING_PLAIN));
			json_object_put(ks);
			append(buf, len, cap, ":");
			json_object_object_get_ex(o, keys[i], &val);
			canon(val, buf, len, cap);
		}
		append(buf, len, cap, "}");
		free(keys);
		break;
	}
	case json_type_array:
		append(buf, len, cap, "[");
		for (size_t i = 0; i < json_object_array_length(o); i++) {
			if (i)
				append(buf, len, cap, ",");
			canon(json_object_array_get_idx(o, i), buf, len, cap);
		}
		append(buf, len, cap, "]");
		break;
	case json_type_null:
		append(buf, len, cap, "null");
		break;
	default:
		append(buf, len, cap, json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
	}
}

void json_fingerprint(struct json_object *o, char out[65])
{
	char *buf = NULL;
	size_t len = 0, cap = 0;

	canon(o, &buf, &len, &cap);
	sha256_hex(buf ? buf : "", len, out);
	free(buf);
}

int idem_key_from_request(struct request *r, const char **key)
{
	const char *k = req_param(r, "HTTP_IDEMPOTENCY_KEY");
	size_t n;

	*key = NULL;
	if (!k)
		return 0;
	n = strlen(k);
	bool ok = n >= 1 && n <= 128;
	for (size_t i = 0; ok && i < n; i++)
		ok = isgraph((unsigned char)k[i]);
	if (!ok) {
		struct json_object *d = json_object_new_object();
		json_object_object_add(d, "max_length", json_object_new_int(128));
		respond_error(r, 400, "invalid_request", d,
			      "Idempotency-Key must be 1 to 128 printable characters");
		return -1;
	}
	*key = k;
	return 0;
}

enum idem_result idem_begin(struct request *r, const char *endpoint,
			    const char *key, const char *fingerprint,
			    const char *object_id)
{
	char ttl[24];
	(void)snprintf(ttl, sizeof(ttl), "%lld", (long long)cfg_int(CFG_IDEMPOTENCY_TTL_SEC));

	for (int attempt = 0; attempt < 2; attempt++) {
		const char *p[] = { endpoint, r->user.id, key, fingerprint, object_id };
		_cleanup_pgres_ PGresult *ins = db_exec(
			r->db,
			"INSERT INTO idempotency (endpoint, user_id, key, fingerprint, object_id) "
			"VALUES ($1, $2, $3, $4, $5::uuid) ON CONFLICT DO NOTHING RETURNING 1",
			5, p);
		if (!ins)
			return IDEM_ERROR;
		if (PQntuples(ins) == 1)
			return IDEM_NEW;
		const char *q[] = { endpoint, r->user.id, key, ttl };
		_cleanup_pgres_ PGresult *old = db_exec(
			r->db,
			"SELECT fingerprint, object_id, status, response::text, "
			"  to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'), "
			"  created_at < now() - make_interval(secs => $4::int) "
			"FROM idempotency WHERE endpoint = $1 AND user_id = $2 AND key = $3 "
			"FOR UPDATE",
			4, q);
		if (!old)
			return IDEM_ERROR;
		if (PQntuples(old) == 0)
			continue; /* deleted meanwhile: try the insert again */
		if (PQgetvalue(old, 0, 5)[0] == 't') {
			/* Past its TTL the key is new again. */
			const char *dp[] = { endpoint, r->user.id, key };
			if (!db_command(r->db,
					"DELETE FROM idempotency WHERE endpoint = $1 "
					"AND user_id = $2 AND key = $3",
					3, dp))
				return IDEM_ERROR;
			continue;
		}
		if (strcmp(PQgetvalue(old, 0, 0), fingerprint) != 0) {
			struct json_object *d = json_object_new_object();
			json_object_object_add(d, "prior_id",
					       json_object_new_string(PQgetvalue(old, 0, 1)));
			json_object_object_add(d, "key", json_object_new_string(key));
			json_object_object_add(d, "prior_created_at",
					       json_object_new_string(PQgetvalue(old, 0, 4)));
			json_object_object_add(d, "idempotency_key_echo", json_object_new_string(key));
			json_object_object_add(d, "idempotency_status", json_object_new_string("conflict"));
			r->pending_error = d;
			return IDEM_CONFLICT;
		}
		r->replay_status = PQgetisnull(old, 0, 2) ? 200 : atoi(PQgetvalue(old, 0, 2));
		r->replay_body = json_tokener_parse(PQgetvalue(old, 0, 3));
		return IDEM_REPLAY;
	}
	return IDEM_ERROR;
}

int idem_finish(struct request *r, const char *endpoint, const char *key,
		int status, struct json_object *response)
{
	char st[8];
	(void)snprintf(st, sizeof(st), "%d", status);
	const char *p[] = { endpoint, r->user.id, key, st,
			    json_object_to_json_string_ext(response, JSON_C_TO_STRING_PLAIN) };
	return db_command(r->db,
			  "UPDATE idempotency SET status = $4::int, response = $5::jsonb "
			  "WHERE endpoint = $1 AND user_id = $2 AND key = $3",
			  5, p) ? 0 : -1;
}

enum idem_result idem_open(struct request *r, const char *endpoint, const char *key,
			   const char *fingerprint, const char *object_id)
{
	enum idem_result res = idem_begin(r, endpoint, key, fingerprint, object_id);

	if (res == IDEM_REPLAY || res == IDEM_CONFLICT)
		(void)db_command(r->db, "ROLLBACK", 0, NULL);
	if (res == IDEM_REPLAY) {
		respond_json(r, r->replay_status, r->replay_body);
		r->replay_body = NULL;
	} else if (res == IDEM_CONFLICT) {
		respond_error(r, 409, "idempotency_conflict", r->pending_error,
			      "Idempotency-Key replay with different body");
		r->pending_error = NULL;
	}
	return res;
}
