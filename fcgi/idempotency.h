/* idempotency.h: Idempotency-Key handling shared by POST /runs and
 * POST /sessions. */
#ifndef SANDBOX_API_IDEMPOTENCY_H
#define SANDBOX_API_IDEMPOTENCY_H

#include "request.h"

enum idem_result { IDEM_NEW, IDEM_REPLAY, IDEM_CONFLICT, IDEM_ERROR };

/* SHA-256 of the canonical form (keys sorted, no whitespace). */
void json_fingerprint(struct json_object *o, char out[65]);
/* The request's Idempotency-Key (NULL if none). -1 after a 400. */
int idem_key_from_request(struct request *r, const char **key);
/* Inside an open transaction: claim `key` for object_id. REPLAY fills
 * r->replay_status/replay_body, CONFLICT fills r->pending_error. */
enum idem_result idem_begin(struct request *r, const char *endpoint,
			    const char *key, const char *fingerprint,
			    const char *object_id);
/* Inside an open transaction, with a key: IDEM_NEW to go on; on a
 * replay or a conflict the transaction is rolled back and the answer
 * given (IDEM_REPLAY / IDEM_CONFLICT); IDEM_ERROR leaves both to the
 * caller. */
enum idem_result idem_open(struct request *r, const char *endpoint, const char *key,
			   const char *fingerprint, const char *object_id);
/* Store the answer that replays will get. */
int idem_finish(struct request *r, const char *endpoint, const char *key,
		int status, struct json_object *response);

#endif
