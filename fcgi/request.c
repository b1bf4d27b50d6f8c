/* request.c: reading requests and writing answers (see request.h). */
#include "request.h"
#include "../lib/log.h"
#include "../lib/util.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

const char *req_param(struct request *r, const char *name)
{
	return FCGX_GetParam(name, r->fcgx->envp);
}

static const char *status_text(int status)
{
	switch (status) {
	case 200: return "OK";
	case 201: return "Created";
	case 202: return "Accepted";
	case 204: return "No Content";
	case 400: return "Bad Request";
	case 401: return "Unauthorized";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 409: return "Conflict";
	case 413: return "Payload Too Large";
	case 415: return "Unsupported Media Type";
	case 416: return "Range Not Satisfiable";
	case 422: return "Unprocessable Entity";
	case 426: return "Upgrade Required";
	case 429: return "Too Many Requests";
	case 500: return "Internal Server Error";
	case 503: return "Service Unavailable";
	case 507: return "Insufficient Storage";
	default: return "Unknown";
	}
}

void respond_raw(struct request *r, int status, const char *content_type,
		 const char *extra_headers, const char *body, size_t len)
{
	r->status = status;
	FCGX_FPrintF(r->fcgx->out,
		     "Status: %d %s\r\nContent-Type: %s\r\n"
		     "Cache-Control: no-store\r\n%s\r\n",
		     status, status_text(status), content_type,
		     extra_headers ? extra_headers : "");
	if (len)
		FCGX_PutStr(body, (int)len, r->fcgx->out);
}

void respond_json(struct request *r, int status, struct json_object *body)
{
	const char *s = json_object_to_json_string_ext(
		body, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
	respond_raw(r, status, "application/json", NULL, s, strlen(s));
	json_object_put(body);
}

static const char *error_title(const char *code)
{
	static const struct { const char *code, *title; } titles[] = {
		{ "invalid_request", "Invalid request" },
		{ "invalid_spec_version", "Invalid spec_version" },
		{ "not_found", "Not found" },
		{ "method_not_allowed", "Method not allowed" },
		{ "unauthorized", "Unauthorized" },
		{ "forbidden", "Forbidden" },
		{ "payload_too_large", "Payload too large" },
		{ "rate_limited", "Rate limited" },
		{ "quota_exceeded", "Quota exceeded" },
		{ "idempotency_conflict", "Idempotency conflict" },
		{ "runtime_unavailable", "Runtime unavailable" },
		{ "not_ready", "Not ready" },
		{ "service_unavailable", "Service unavailable" },
		{ "internal_error", "Internal error" },
		{ "queue_full", "Queue full" },
		{ "policy_unsupported", "Policy unsupported" },
	};
	for (size_t i = 0; i < ARRAY_SIZE(titles); i++)
		if (strcmp(titles[i].code, code) == 0)
			return titles[i].title;
	return code;
}

static void respond_error_v(struct request *r, int status, const char *headers,
			    const char *code, struct json_object *details,
			    const char *fmt, va_list ap)
{
	char msg[1024];
	struct json_object *o = json_object_new_object();

	(void)vsnprintf(msg, sizeof(msg), fmt, ap);
	if (!details)
		details = json_object_new_object();

	if (r->want_problem) {
		char type[160];
		(void)snprintf(type, sizeof(type), "urn:sandbox:error:%s", code);
		json_object_object_add(o, "type", json_object_new_string(type));
		json_object_object_add(o, "title",
				       json_object_new_string(error_title(code)));
		json_object_object_add(o, "status", json_object_new_int(status));
		json_object_object_add(o, "detail", json_object_new_string(msg));
		json_object_object_add(details, "code", json_object_new_string(code));
		json_object_object_add(o, "extensions", details);
		json_object_object_add(o, "request_id",
				       json_object_new_string(r->request_id));
		const char *s = json_object_to_json_string_ext(
			o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
		respond_raw(r, status, "application/problem+json", headers, s,
			    strlen(s));
		json_object_put(o);
		return;
	}
	struct json_object *e = json_object_new_object();
	json_object_object_add(e, "code", json_object_new_string(code));
	json_object_object_add(e, "message", json_object_new_string(msg));
	json_object_object_add(e, "details", details);
	json_object_object_add(o, "error", e);
	json_object_object_add(o, "request_id",
			       json_object_new_string(r->request_id));
	const char *s = json_object_to_json_string_ext(
		o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
	respond_raw(r, status, "application/json", headers, s, strlen(s));
	json_object_put(o);
}

void respond_error(struct request *r, int status, const char *code,
		   struct json_object *details, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	respond_error_v(r, status, NULL, code, details, fmt, ap);
	va_end(ap);
}

void respond_error_h(struct request *r, int status, const char *headers,
		     const char *code, struct json_object *details,
		     const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	respond_error_v(r, status, headers, code, details, fmt, ap);
	va_end(ap);
}

void respond_page(struct request *r, const char *items_json, long long total, int64_t limit,
		  int64_t offset)
{
	struct json_object *o = json_object_new_object();
	json_object_object_add(o, "items", json_tokener_parse(items_json));
	json_object_object_add(o, "total", json_object_new_int64(total));
	json_object_object_add(o, "limit", json_object_new_int64(limit));
	json_object_object_add(o, "offset", json_object_new_int64(offset));
	json_object_object_add(o, "has_more", json_object_new_boolean(offset + limit < total));
	respond_json(r, 200, o);
}

void respond_db_error(struct request *r)
{
	/* A statement that failed on a healthy connection is our bug, not an
	 * outage: 500, and the details stay in the log. */
	if (r->db->conn && PQstatus(r->db->conn) == CONNECTION_OK) {
		log_msg(LOG_LVL_ERROR, log_fields("db_error", r->db->last_error, NULL),
			"database statement failed");
		respond_error(r, 500, "internal_error", NULL,
			      "internal error; the request id identifies it in the logs");
		return;
	}
	log_msg(LOG_LVL_ERROR, log_fields("db_error", r->db->last_error, NULL),
		"database unavailable");
	respond_error(r, 503, "service_unavailable",
		      json_object_new_object(),
		      "the database is unavailable; retry shortly");
}

int req_read_body(struct request *r, size_t max)
{
	const char *cl = req_param(r, "CONTENT_LENGTH");
	int64_t len = 0;
	const char *why;

	if (cl && *cl && parse_i64(cl, 0, INT64_MAX, &len, &why) < 0) {
		respond_error(r, 400, "invalid_request", NULL,
			      "invalid Content-Length");
		return -1;
	}
	if ((uint64_t)len > max) {
		struct json_object *d = json_object_new_object();
		json_object_object_add(d, "max_bytes", json_object_new_int64((int64_t)max));
		json_object_object_add(d, "content_length", json_object_new_int64(len));
		respond_error(r, 413, "payload_too_large", d,
			      "request body of %lld bytes exceeds the limit of %zu bytes",
			      (long long)len, max);
		return -1;
	}
	r->body = xcalloc(1, (size_t)len + 1);
	size_t got = 0;
	while (got < (size_t)len) {
		int n = FCGX_GetStr(r->body + got, (int)((size_t)len - got),
				    r->fcgx->in);
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	if (got != (size_t)len) {
		respond_error(r, 400, "invalid_request", NULL,
			      "request body shorter than Content-Length");
		return -1;
	}
	r->body_len = got;
	return 0;
}

struct json_object *req_json_body(struct request *r, size_t max)
{
	const char *ct = req_param(r, "CONTENT_TYPE");
	struct json_tokener *tok;
	struct json_object *o;

	if (ct && *ct && strncasecmp(ct, "application/json", 16) != 0) {
		respond_error(r, 415, "invalid_request",
			      log_fields("content_type", ct, NULL),
			      "expected Content-Type: application/json");
		return NULL;
	}
	if (req_read_body(r, max) < 0)
		return NULL;
	/* Depth bounded: a deeply nested document is refused, not recursed. */
	tok = json_tokener_new_ex(32);
	o = json_tokener_parse_ex(tok, r->body, (int)r->body_len);
	enum json_tokener_error jerr = json_tokener_get_error(tok);
	size_t used = json_tokener_get_parse_end(tok);
	json_tokener_free(tok);
	if (!o || jerr != json_tokener_success) {
		json_object_put(o);
		respond_error(r, 400, "invalid_request",
			      log_fields("parse_error", json_tokener_error_desc(jerr),
					 NULL),
			      "request body is not valid JSON");
		return NULL;
	}
	while (used < r->body_len && strchr(" \t\r\n", r->body[used]))
		used++;
	if (used != r->body_len || !json_object_is_type(o, json_type_object)) {
		json_object_put(o);
		respond_error(r, 400, "invalid_request", NULL,
			      "request body must be one JSON object");
		return NULL;
	}
	return o;
}


char *req_query(struct request *r, const char *name)
{
	size_t nlen = strlen(name);
	const char *q = r->query;

	while (q && *q) {
		const char *amp = strchr(q, '&');
		size_t seg = amp ? (size_t)(amp - q) : strlen(q);
		if (seg > nlen && strncmp(q, name, nlen) == 0 && q[nlen] == '=') {
			const char *v = q + nlen + 1;
			size_t vlen = seg - nlen - 1;
			char *out = xcalloc(1, vlen + 1), *o = out;
			for (size_t i = 0; i < vlen; i++) {
				if (v[i] == '+') {
					*o++ = ' ';
				} else if (v[i] == '%' && i + 2 < vlen &&
					   hex_digit(v[i + 1]) >= 0 &&
					   hex_digit(v[i + 2]) >= 0) {
					*o++ = (char)(hex_digit(v[i + 1]) * 16 +
						      hex_digit(v[i + 2]));
					i += 2;
				} else {
					*o++ = v[i];
				}
			}
			return out;
		}
		q = amp ? amp + 1 : NULL;
	}
	return NULL;
}
