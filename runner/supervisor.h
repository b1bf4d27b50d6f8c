/* supervisor.h: state shared by the files of sandbox-supervisor. */
#ifndef SANDBOX_SUPERVISOR_H
#define SANDBOX_SUPERVISOR_H

#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>

#include "../lib/db.h"

struct supervisor {
	struct db db;
	char node_id[128];
	char hostname[128];
	struct json_object *runtimes; /* last probe result */
	int64_t last_probe_ms;
	bool registered; /* a heartbeat has reached the database */
};

/* hostprep.c: make the host able to run containers (cgroup layout). */
int hostprep_cgroups(void);

/* probe.c: what each runtime can do here, as reported in `nodes`. */
struct json_object *probe_runtimes(void);

/* node.c: the supervisor's row in `nodes`. */
int node_heartbeat(struct supervisor *s);
void node_retire(struct supervisor *s);

#endif
