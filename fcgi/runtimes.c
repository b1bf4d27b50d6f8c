/* runtimes.c: GET /runtimes, the PRD's feature discovery. Availability
 * comes from what live supervisors last reported in `nodes`: the api never
 * touches a runtime itself. */
#include "images.h"
#include "router.h"
#include "../lib/config.h"
#include "../lib/util.h"

#include <stdio.h>
#include <string.h>

static const char *const runtime_names[] = { "oci", "docker", "firecracker" };

struct json_object *runtimes_reported(struct request *r, int *fresh_nodes,
				      double *heartbeat_age)
{
	char stale[24];
	(void)snprintf(stale, sizeof(stale), "%lld",
		       (long long)cfg_int(CFG_NODE_STALE_SEC));
	const char *params[] = { stale };
	_cleanup_pgres_ PGresult *res = db_exec(
		r->db,
		"SELECT runtimes::text, "
		"  extract(epoch FROM now() - heartbeat_at)::float8 "
		"FROM nodes WHERE heartbeat_at > now() - make_interval(secs => $1::int) "
		"ORDER BY heartbeat_at DESC",
		1, params);
	*fresh_nodes = 0;
	*heartbeat_age = -1;
	if (!res)
		return NULL;
	*fresh_nodes = PQntuples(res);
	struct json_object *out = json_object_new_object();
	for (size_t i = 0; i < ARRAY_SIZE(runtime_names); i++) {
		const char *name = runtime_names[i];
		struct json_object *merged = NULL;
		for (int row = 0; row < PQntuples(res); row++) {
			struct json_object *all = json_tokener_parse(PQgetvalue(res, row, 0));
			struct json_object *one = NULL, *av = NULL;
			if (all && json_object_object_get_ex(all, name, &one) &&
			    json_object_is_type(one, json_type_object)) {
				json_object_object_get_ex(one, "available", &av);
				/* Prefer a node that can run it. */
				if (!merged || json_object_get_boolean(av)) {
					json_object_put(merged);
					merged = json_object_get(one);
				}
			}
			json_object_put(all);
			if (merged && json_object_object_get_ex(merged, "available", &av) &&
			    json_object_get_boolean(av))
				break;
		}
		if (!merged) {
			merged = json_object_new_object();
			json_object_object_add(merged, "available",
					       json_object_new_boolean(0));
			json_object_object_add(
				merged, "notes",
				json_object_new_string(*fresh_nodes
							       ? "not reported by any supervisor"
							       : "no live supervisor"));
		}
		json_object_object_add(out, name, merged);
	}
	if (*fresh_nodes > 0) {
		char *end = NULL;
		*heartbeat_age = strtod(PQgetvalue(res, 0, 1), &end);
	}
	return out;
}

static struct json_object *spec_versions(void)
{
	const char *const *items;
	size_t n = cfg_list(CFG_SUPPORTED_SPEC_VERSIONS, &items);
	struct json_object *a = json_object_new_array();

	for (size_t i = 0; i < n; i++)
		json_object_array_add(a, json_object_new_string(items[i]));
	return a;
}

void h_runtimes(struct request *r)
{
	int nodes = 0;
	double age = -1;
	struct json_object *reported = runtimes_reported(r, &nodes, &age);
	struct json_object *list = json_object_new_array();

	struct json_object *images = reported ? images_list(r) : NULL;
	if (!reported || !images) {
		json_object_put(reported);
		respond_db_error(r);
		return;
	}
	for (size_t i = 0; i < ARRAY_SIZE(runtime_names); i++) {
		struct json_object *rep = NULL, *v = NULL;
		struct json_object *o = json_object_new_object();
		json_object_object_get_ex(reported, runtime_names[i], &rep);
		json_object_object_add(o, "name",
				       json_object_new_string(runtime_names[i]));
		json_object_object_get_ex(rep, "available", &v);
		json_object_object_add(o, "available",
				       json_object_new_boolean(json_object_get_boolean(v)));
		v = NULL;
		json_object_object_get_ex(rep, "version", &v);
		json_object_object_add(o, "runtime_version", json_object_get(v));
		json_object_object_add(o, "default", json_object_new_boolean(
			strcmp(runtime_names[i], cfg_str(CFG_DEFAULT_RUNTIME)) == 0));
		struct json_object *di = json_object_new_array();
		for (size_t k = 0; images && k < json_object_array_length(images); k++) {
			struct json_object *im = json_object_array_get_idx(images, k), *n, *dg, *al;
			char ref[400];
			json_object_object_get_ex(im, "name", &n);
			json_object_object_get_ex(im, "digest", &dg);
			json_object_object_get_ex(im, "aliases", &al);
			for (size_t a = 0; a < json_object_array_length(al); a++) {
				(void)snprintf(ref, sizeof(ref), "%s@%s",
					       json_object_get_string(json_object_array_get_idx(al, a)),
					       json_object_get_string(dg));
				json_object_array_add(di, json_object_new_string(ref));
			}
			(void)snprintf(ref, sizeof(ref), "%s@%s", json_object_get_string(n),
				       json_object_get_string(dg));
			json_object_array_add(di, json_object_new_string(ref));
		}
		json_object_object_add(o, "default_images", di);
		json_object_object_add(o, "max_cpu",
				       json_object_new_double(cfg_float(CFG_MAX_CPU)));
		json_object_object_add(o, "max_mem_mb",
				       json_object_new_int64(cfg_int(CFG_MAX_MEM_MB)));
		json_object_object_add(o, "max_upload_mb",
				       json_object_new_int64(cfg_int(CFG_MAX_UPLOAD_MB)));
		json_object_object_add(o, "max_log_bytes",
				       json_object_new_int64(cfg_int(CFG_MAX_LOG_BYTES)));
		json_object_object_add(o, "queue_max_length",
				       json_object_new_int64(cfg_int(CFG_QUEUE_MAX_LENGTH)));
		json_object_object_add(o, "queue_ttl_sec",
				       json_object_new_int64(cfg_int(CFG_QUEUE_TTL_SEC)));
		json_object_object_add(o, "workspace_cap_mb",
				       json_object_new_int64(cfg_int(CFG_WORKSPACE_CAP_MB)));
		json_object_object_add(o, "artifact_ttl_hours",
				       json_object_new_int64(cfg_int(CFG_ARTIFACT_TTL_HOURS)));
		json_object_object_add(o, "supported_spec_versions", spec_versions());
		/* Interactive runs (spec 1.1): oci's stdin pipe, docker's attach. */
		json_object_object_add(o, "interactive_supported",
				       json_object_new_boolean(strcmp(runtime_names[i], "firecracker") != 0));
		json_object_object_add(o, "egress_allowlist_supported",
				       json_object_new_boolean(0));
		v = NULL;
		json_object_object_get_ex(rep, "notes", &v);
		json_object_object_add(o, "notes", json_object_get(v));
		json_object_array_add(list, o);
	}
	json_object_put(reported);
	struct json_object *out = json_object_new_object();
	json_object_object_add(out, "store_mode", json_object_new_string("postgres"));
	json_object_object_add(out, "default_runtime",
			       json_object_new_string(cfg_str(CFG_DEFAULT_RUNTIME)));
	json_object_object_add(out, "supported_spec_versions", spec_versions());
	json_object_object_add(out, "runtimes", list);
	json_object_object_add(out, "images", images);
	respond_json(r, 200, out);
}
