/* node.c: the supervisor's row in `nodes`. The api reads heartbeat_at to
 * decide readiness and runtimes to answer /runtimes. */
#include "supervisor.h"
#include "../lib/config.h"
#include "../lib/log.h"
#include "../lib/util.h"

#include <stdio.h>
#include <unistd.h>

#define SANDBOX_VERSION "0.1.0"

int node_heartbeat(struct supervisor *s)
{
	char pid[16];
	const char *rt = json_object_to_json_string_ext(s->runtimes,
							JSON_C_TO_STRING_PLAIN);
	(void)snprintf(pid, sizeof(pid), "%d", (int)getpid());
	const char *params[] = { s->node_id, s->hostname, SANDBOX_VERSION, pid,
				 cfg_str(CFG_SUPERVISOR_SOCKET), rt };
	PGresult *r = db_exec(
		&s->db,
		"INSERT INTO nodes (node_id, hostname, version, pid, "
		"  supervisor_socket, runtimes) "
		"VALUES ($1, $2, $3, $4::int, $5, $6::jsonb) "
		"ON CONFLICT (node_id) DO UPDATE SET hostname = EXCLUDED.hostname, "
		"  version = EXCLUDED.version, pid = EXCLUDED.pid, "
		"  supervisor_socket = EXCLUDED.supervisor_socket, "
		"  runtimes = EXCLUDED.runtimes, heartbeat_at = now(), "
		"  started_at = CASE WHEN nodes.pid = EXCLUDED.pid "
		"    THEN nodes.started_at ELSE now() END",
		6, params);
	if (!r) {
		if (s->registered)
			log_msg(LOG_LVL_WARN,
				log_fields("db_error", s->db.last_error, NULL),
				"heartbeat failed; will retry");
		s->registered = false;
		return -1;
	}
	PQclear(r);
	if (!s->registered)
		log_info("heartbeat registered as node %s", s->node_id);
	s->registered = true;
	return 0;
}

/* On a clean stop the node stops counting as live at once instead of
 * after SANDBOX_NODE_STALE_SEC. */
void node_retire(struct supervisor *s)
{
	const char *params[] = { s->node_id };
	PGresult *r = db_exec(&s->db,
			      "UPDATE nodes SET heartbeat_at = 'epoch' "
			      "WHERE node_id = $1",
			      1, params);
	if (r)
		PQclear(r);
}
