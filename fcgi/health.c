/* health.c: liveness (no dependencies) and readiness (PostgreSQL, a live
 * supervisor, the default runtime). Neither needs a key: load balancers
 * and systemd probes call them. */
#include "router.h"
#include "../lib/config.h"
#include "../lib/log.h"

#include <string.h>

void h_healthz(struct request *r)
{
	struct json_object *o = json_object_new_object();

	json_object_object_add(o, "status", json_object_new_string("ok"));
	respond_json(r, 200, o);
}

static struct json_object *check(bool ok, const char *error)
{
	struct json_object *c = json_object_new_object();

	json_object_object_add(c, "ok", json_object_new_boolean(ok));
	if (error)
		json_object_object_add(c, "error", json_object_new_string(error));
	return c;
}

void h_readyz(struct request *r)
{
	struct json_object *checks = json_object_new_object();
	struct json_object *failing = json_object_new_array();
	const char *def = cfg_str(CFG_DEFAULT_RUNTIME);

	if (!db_ok(r->db)) {
		log_msg(LOG_LVL_WARN, log_fields("db_error", r->db->last_error, NULL),
			"readyz: postgres unreachable");
		json_object_object_add(checks, "postgres",
				       check(false, "unreachable"));
		json_object_array_add(failing, json_object_new_string("postgres"));
	} else {
		int nodes = 0;
		double age = -1;
		json_object_object_add(checks, "postgres", check(true, NULL));
		struct json_object *rt = runtimes_reported(r, &nodes, &age);
		struct json_object *sup = check(nodes > 0,
						nodes > 0 ? NULL : "no supervisor heartbeat");
		json_object_object_add(sup, "live_nodes", json_object_new_int(nodes));
		if (age >= 0) {
			char txt[32];
			(void)snprintf(txt, sizeof(txt), "%.3f", age);
			json_object_object_add(sup, "heartbeat_age_sec",
					       json_object_new_double_s(age, txt));
		}
		json_object_object_add(checks, "supervisor", sup);
		if (nodes == 0)
			json_object_array_add(failing,
					      json_object_new_string("supervisor"));
		struct json_object *d = NULL;
		if (rt && json_object_object_get_ex(rt, def, &d) && d) {
			struct json_object *av = NULL;
			json_object_object_get_ex(d, "available", &av);
			if (!json_object_get_boolean(av) && nodes > 0) {
				char name[64];
				(void)snprintf(name, sizeof(name), "runtime:%s", def);
				json_object_array_add(failing,
						      json_object_new_string(name));
			}
		}
		if (rt)
			json_object_object_add(checks, "runtimes", rt);
	}

	if (json_object_array_length(failing) > 0) {
		struct json_object *d = json_object_new_object();
		json_object_object_add(d, "failing", failing);
		json_object_object_add(d, "checks", checks);
		respond_error(r, 503, "not_ready", d, "not ready: %s",
			      json_object_get_string(json_object_array_get_idx(
				      failing, 0)));
		return;
	}
	json_object_put(failing);
	struct json_object *o = json_object_new_object();
	json_object_object_add(o, "status", json_object_new_string("ready"));
	json_object_object_add(o, "checks", checks);
	respond_json(r, 200, o);
}
