/* metrics.h: what the api counts itself (request counts and latency per
 * route and status, uploads, queue-full refusals), in a shared anonymous
 * mapping every forked worker adds to atomically; and the two ways out:
 * Prometheus text at /metrics and the PRD's JSON at /admin/metrics, both
 * merging these with the counters the database keeps (sql/008) and the
 * supervisors report (nodes.stats). */
#ifndef SANDBOX_API_METRICS_H
#define SANDBOX_API_METRICS_H

#include "request.h"

#include <stdint.h>

enum upload_kind { UPLOAD_MULTIPART, UPLOAD_TAR, UPLOAD_ZIP, UPLOAD_PUT, UPLOAD_KINDS };

/* In the master, before forking workers. */
int metrics_init(void);
/* route: index into the route table, -1 when no route matched. */
void metrics_request(int route, int status, int64_t duration_us);
void metrics_upload(enum upload_kind kind, int64_t bytes, int64_t files);
void metrics_queue_full(const char *runtime);

void h_metrics_prometheus(struct request *r);
void h_admin_metrics(struct request *r);

#endif
