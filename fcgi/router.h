/* router.h: the route table of sandbox-api and the handlers it names. */
#ifndef SANDBOX_API_ROUTER_H
#define SANDBOX_API_ROUTER_H

#include "request.h"

typedef void (*handler_fn)(struct request *r);

void route_request(struct request *r);
/* The route table, for metrics: pattern of route i (NULL past the end). */
const char *route_pattern(int i);

/* auth.c */
int auth_authenticate(struct request *r); /* 0, or -1 after a 401 */

/* health.c */
void h_healthz(struct request *r);
void h_readyz(struct request *r);

/* runs.c */
/* One run's columns `cols`, of `owner` (NULL: anyone's). NULL after having
 * answered: 404 for a malformed, unknown or foreign id, 5xx for the
 * database. */
PGresult *run_lookup(struct request *r, const char *id, const char *cols,
		     const char *owner);
void h_runs_create(struct request *r);
void h_runs_list(struct request *r);
void h_run_get(struct request *r);
void h_run_logs(struct request *r);
void h_run_cancel(struct request *r);

/* sessions.c */
void h_sessions_create(struct request *r);
void h_sessions_list(struct request *r);
void h_session_get(struct request *r);
void h_session_delete(struct request *r);

/* files.c, upload.c */
void h_files_list(struct request *r);
void h_files_upload(struct request *r);
void h_file_get(struct request *r);
void h_file_put(struct request *r);
void h_file_delete(struct request *r);

/* artifacts.c */
void h_artifacts_list(struct request *r);
void h_artifact_get(struct request *r);

/* admin.c */
void h_admin_runs(struct request *r);
void h_admin_run(struct request *r);
void h_admin_idempotency(struct request *r);
void h_admin_usage(struct request *r);
void h_admin_usage_summary(struct request *r);

/* streams.c */
void h_run_stream(struct request *r);
void stream_token(const char *run_id, const char *exp, char out[65]);

/* runtimes.c */
void h_runtimes(struct request *r);
/* Availability of each runtime as the live supervisors report it:
 * {"oci":{"available":..,"version":..,"notes":..},...}; NULL when the
 * database cannot be asked. *fresh_nodes gets the live supervisor count. */
struct json_object *runtimes_reported(struct request *r, int *fresh_nodes,
				      double *heartbeat_age);

#endif
