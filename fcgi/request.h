/* request.h: one struct owns one request: its FastCGI streams, headers,
 * body, caller identity and answer. Handlers fill it; request_free()
 * releases everything. */
#ifndef SANDBOX_API_REQUEST_H
#define SANDBOX_API_REQUEST_H

#include <fcgiapp.h>
#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../lib/db.h"

#define MAX_PATH_PARAMS 4

struct user {
	char id[65];
	bool admin;
	char key_id[32];
};

struct request {
	FCGX_Request *fcgx;
	struct db *db;
	const char *method;
	const char *path;  /* decoded path below nothing; as nginx saw it */
	const char *query; /* raw query string */
	char request_id[129];
	bool want_problem; /* Accept: application/problem+json */
	bool authenticated;
	struct user user;
	const char *params[MAX_PATH_PARAMS]; /* {id} captures (owned) */
	int nparams;
	char *body;
	size_t body_len;
	int status; /* answer status, for the access log */
	int route;  /* index of the matched route, -1 if none (metrics) */
	/* Idempotency replay / conflict details (idempotency.c). */
	int replay_status;
	struct json_object *replay_body;
	struct json_object *pending_error;
};

/* FastCGI parameter or header ("HTTP_X_API_KEY"); NULL if absent. */
const char *req_param(struct request *r, const char *name);
/* Read the whole body, at most max bytes. Returns 0, or -1 after having
 * answered (413 / 400). */
int req_read_body(struct request *r, size_t max);
/* Parse the body as a JSON object. Returns NULL after having answered. */
struct json_object *req_json_body(struct request *r, size_t max);
/* Query parameter (URL-decoded, caller frees); NULL if absent. */
char *req_query(struct request *r, const char *name);

/* Answers. body is consumed. */
void respond_json(struct request *r, int status, struct json_object *body);
void respond_raw(struct request *r, int status, const char *content_type,
		 const char *extra_headers, const char *body, size_t len);
/* PRD envelope {"error":{code,message,details}} plus request_id, or RFC
 * 7807 when the client asked for application/problem+json. details is
 * consumed (may be NULL). */
void respond_error(struct request *r, int status, const char *code,
		   struct json_object *details, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
/* The same with extra header lines ("Name: value\r\n..."). */
void respond_error_h(struct request *r, int status, const char *headers,
		     const char *code, struct json_object *details,
		     const char *fmt, ...) __attribute__((format(printf, 6, 7)));
/* A page of a list: {items (JSON text), total, limit, offset, has_more}. */
void respond_page(struct request *r, const char *items_json, long long total, int64_t limit,
		  int64_t offset);
/* 503 with the database error hidden from the client but logged. */
void respond_db_error(struct request *r);

#endif
