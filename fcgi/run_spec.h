/* run_spec.h: validation of a POST /runs body into what the runs table
 * stores. Every field the PRD defines is checked, every limit enforced,
 * and every refusal names the field. */
#ifndef SANDBOX_API_RUN_SPEC_H
#define SANDBOX_API_RUN_SPEC_H

#include "request.h"

#define MAX_INLINE_FILES_BYTES (1024 * 1024)
#define MAX_INLINE_FILES 100
#define MAX_COMMAND_ARGS 256
#define MAX_COMMAND_BYTES (256 * 1024)
#define MAX_ENV_VARS 256
#define MAX_ENV_BYTES (64 * 1024)
#define MAX_CAPTURE_PATTERNS 64
#define MAX_TIMEOUT_SEC 86400
#define MAX_STARTUP_TIMEOUT_SEC 3600

struct run_spec {
	const char *spec_version;
	const char *runtime;
	const char *session_id;
	const char *base_image;
	struct json_object *command, *env, *files, *capture; /* borrowed */
	int timeout_sec, startup_timeout_sec;
	double cpu;
	int memory_mb, pids;
	int64_t resume_from_seq; /* 0: none */
	bool interactive;
	int64_t stdin_max_bytes, stdin_max_frame_bytes, stdin_bps, stdin_idle_timeout_sec;
	char image[65];
	char digest[80];
	/* A run in a session: what it inherits (owned; run_spec_free). */
	char session_buf[37], base_image_buf[256], runtime_buf[32];
	struct json_object *session_env;
};

void run_spec_free(struct run_spec *s);

/* sessions.c: fill a run's spec from its session (owner's, live); -1
 * after a 404 that says what to do. Touches the session (activity). */
int session_for_run(struct request *r, const char *session_id, struct run_spec *s);

/* Helpers shared with the session spec (sessions.c). */
/* 400 naming every field of body not in known; -1 after answering. */
int spec_known_fields(struct request *r, struct json_object *body, const char *const *known,
		      size_t nknown, const char *what);
int spec_bad(struct request *r, int status, const char *field, const char *msg);
bool spec_string(struct json_object *v);
int spec_int(struct request *r, struct json_object *body, const char *k, int def, int min,
	     int max, int *out);
int spec_env(struct request *r, struct json_object *env);
int spec_resources(struct request *r, struct json_object *res, struct run_spec *s);
int spec_network_policy(struct request *r, struct json_object *body);

/* -1 after having answered with the error. */
int run_spec_parse(struct request *r, struct json_object *body, struct run_spec *s);
/* spec_version check shared with sessions; -1 after a 400. */
int spec_version_check(struct request *r, struct json_object *body, const char **out);
/* The runtime a request asks for (or the default) must be known and
 * available; -1 after a 400/503. */
int runtime_check(struct request *r, const char *runtime);

#endif
