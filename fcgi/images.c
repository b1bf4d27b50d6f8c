/* images.c: the image catalog as the api sees it: names registered by the
 * supervisors plus the configured aliases (SANDBOX_IMAGE_ALIASES, entries
 * "alias=name"). `name@sha256:...` pins a digest. */
#include "images.h"
#include "../lib/config.h"
#include "../lib/util.h"

#include <stdio.h>
#include <string.h>

static const char *alias_target(const char *name, char *buf, size_t buflen)
{
	const char *const *items;
	size_t n = cfg_list(CFG_IMAGE_ALIASES, &items);
	size_t len = strlen(name);

	for (size_t i = 0; i < n; i++) {
		const char *eq = strchr(items[i], '=');
		if (eq && (size_t)(eq - items[i]) == len && strncmp(items[i], name, len) == 0) {
			(void)strlcpy_ok(buf, eq + 1, buflen);
			return buf;
		}
	}
	return NULL;
}

struct json_object *images_list(struct request *r)
{
	_cleanup_pgres_ PGresult *res = db_exec(
		r->db, "SELECT name, digest, packages FROM images ORDER BY name", 0, NULL);
	if (!res)
		return NULL;
	struct json_object *a = json_object_new_array();
	const char *const *items;
	size_t na = cfg_list(CFG_IMAGE_ALIASES, &items);
	for (int i = 0; i < PQntuples(res); i++) {
		struct json_object *o = json_object_new_object(), *al = json_object_new_array();
		const char *name = PQgetvalue(res, i, 0);
		json_object_object_add(o, "name", json_object_new_string(name));
		json_object_object_add(o, "digest", json_object_new_string(PQgetvalue(res, i, 1)));
		json_object_object_add(o, "packages", json_object_new_string(PQgetvalue(res, i, 2)));
		for (size_t k = 0; k < na; k++) {
			const char *eq = strchr(items[k], '=');
			if (eq && strcmp(eq + 1, name) == 0) {
				char alias[256];
				size_t l = (size_t)(eq - items[k]);
				if (l >= sizeof(alias))
					continue;
				memcpy(alias, items[k], l);
				alias[l] = '\0';
				json_object_array_add(al, json_object_new_string(alias));
			}
		}
		json_object_object_add(o, "aliases", al);
		json_object_array_add(a, o);
	}
	return a;
}

int image_resolve(struct request *r, const char *requested, char name[65],
		  char digest[80])
{
	char want[256], target[128];
	const char *pin = NULL;
	_cleanup_pgres_ PGresult *res = NULL;

	if (strlen(requested) >= sizeof(want))
		goto unknown;
	(void)strlcpy_ok(want, requested, sizeof(want));
	char *at = strchr(want, '@');
	if (at) {
		*at = '\0';
		pin = at + 1;
	}
	const char *lookup = alias_target(want, target, sizeof(target));
	if (!lookup)
		lookup = want;
	const char *p[] = { lookup };
	res = db_exec(r->db, "SELECT name, digest FROM images WHERE name = $1", 1, p);
	if (!res) {
		respond_db_error(r);
		return -1;
	}
	if (PQntuples(res) == 1 && (!pin || strcmp(pin, PQgetvalue(res, 0, 1)) == 0)) {
		(void)strlcpy_ok(name, PQgetvalue(res, 0, 0), 65);
		(void)strlcpy_ok(digest, PQgetvalue(res, 0, 1), 80);
		return 0;
	}
unknown:;
	struct json_object *d = json_object_new_object(), *avail = json_object_new_array();
	struct json_object *list = images_list(r);
	for (size_t i = 0; list && i < json_object_array_length(list); i++) {
		struct json_object *im = json_object_array_get_idx(list, i), *v, *al;
		json_object_object_get_ex(im, "name", &v);
		json_object_array_add(avail, json_object_get(v));
		json_object_object_get_ex(im, "aliases", &al);
		for (size_t k = 0; k < json_object_array_length(al); k++)
			json_object_array_add(avail, json_object_get(json_object_array_get_idx(al, k)));
	}
	json_object_put(list);
	json_object_object_add(d, "base_image", json_object_new_string(requested));
	json_object_object_add(d, "available", avail);
	respond_error(r, 400, "invalid_request", d,
		      "unknown base_image '%.200s'%s; see details.available", requested,
		      pin ? " (or its digest does not match)" : "");
	return -1;
}
