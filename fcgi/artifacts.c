/* artifacts.c: GET /runs/{id}/artifacts and GET /runs/{id}/artifacts/{path}.
 * The supervisor captured them (capture_patterns) into the run's
 * artifacts directory and recorded them in `artifacts`; the api checks
 * owner and path and hands the bytes to nginx (download.h). */
#include "download.h"
#include "router.h"
#include "../lib/wspath.h"
#include "../lib/config.h"
#include "../lib/util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int artifacts_dir(const char *run_id)
{
	char path[700];

	(void)snprintf(path, sizeof(path), "%s/runs/%s/artifacts", cfg_str(CFG_DATA_ROOT), run_id);
	return open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

void h_artifacts_list(struct request *r)
{
	const char *id = r->params[0];
	_cleanup_pgres_ PGresult *run = run_lookup(
		r, id, "artifacts_truncated, artifacts_expired_at IS NOT NULL, artifact_bytes, phase",
		r->user.id);

	if (!run)
		return;
	const char *p[] = { id };
	_cleanup_pgres_ PGresult *res = db_exec(
		r->db, "SELECT path, type, size, target FROM artifacts WHERE run_id = $1::uuid ORDER BY path",
		1, p);
	if (!res) {
		respond_db_error(r);
		return;
	}
	bool expired = PQgetvalue(run, 0, 1)[0] == 't';
	int dir = expired ? -1 : artifacts_dir(id);
	struct json_object *items = json_object_new_array();
	for (int i = 0; !expired && i < PQntuples(res); i++) {
		const char *path = PQgetvalue(res, i, 0), *type = PQgetvalue(res, i, 1);
		struct json_object *o = json_object_new_object();
		char enc[WSPATH_MAX * 3 + 1], url[WSPATH_MAX * 3 + 128];
		json_object_object_add(o, "path", json_object_new_string(path));
		json_object_object_add(o, "type", json_object_new_string(type));
		json_object_object_add(o, "size", json_object_new_int64(atoll(PQgetvalue(res, i, 2))));
		if (strcmp(type, "symlink") == 0) {
			json_object_object_add(o, "target", json_object_new_string(PQgetvalue(res, i, 3)));
			json_object_object_add(o, "content_type", NULL);
			json_object_object_add(o, "download_url", NULL);
		} else {
			int fd = dir >= 0 ? wspath_open(dir, path, O_RDONLY | O_NONBLOCK, 0) : -1;
			json_object_object_add(o, "content_type",
					       json_object_new_string(fd >= 0 ? download_content_type(fd)
									      : "application/octet-stream"));
			if (fd >= 0)
				close(fd);
			wspath_url_encode(path, enc, sizeof(enc));
			(void)snprintf(url, sizeof(url), "/api/v1/sandbox/runs/%s/artifacts/%s", id, enc);
			json_object_object_add(o, "download_url", json_object_new_string(url));
		}
		json_object_array_add(items, o);
	}
	if (dir >= 0)
		close(dir);
	struct json_object *out = json_object_new_object();
	json_object_object_add(out, "run_id", json_object_new_string(id));
	json_object_object_add(out, "items", items);
	json_object_object_add(out, "total_bytes", json_object_new_int64(atoll(PQgetvalue(run, 0, 2))));
	json_object_object_add(out, "truncated", json_object_new_boolean(PQgetvalue(run, 0, 0)[0] == 't'));
	json_object_object_add(out, "expired", json_object_new_boolean(expired));
	respond_json(r, 200, out);
}

void h_artifact_get(struct request *r)
{
	const char *id = r->params[0];
	char path[WSPATH_MAX + 1], enc[WSPATH_MAX * 3 + 1], accel[WSPATH_MAX * 3 + 200];

	/* The path is judged before the run: a traversal is a 400 whoever asks. */
	if (download_path(r, r->params[1], 64, path, sizeof(path)) < 0)
		return;
	_cleanup_pgres_ PGresult *run = run_lookup(r, id, "artifacts_expired_at IS NOT NULL", r->user.id);
	if (!run)
		return;
	const char *p[] = { id, path };
	_cleanup_pgres_ PGresult *res = db_exec(
		r->db, "SELECT type FROM artifacts WHERE run_id = $1::uuid AND path = $2", 2, p);
	if (!res) {
		respond_db_error(r);
		return;
	}
	if (PQntuples(res) == 0 || PQgetvalue(run, 0, 0)[0] == 't') {
		struct json_object *d = json_object_new_object();
		json_object_object_add(d, "path", json_object_new_string(path));
		json_object_object_add(d, "expired", json_object_new_boolean(PQgetvalue(run, 0, 0)[0] == 't'));
		respond_error(r, 404, "not_found", d,
			      PQgetvalue(run, 0, 0)[0] == 't'
				      ? "the artifacts of run %s have expired (SANDBOX_ARTIFACT_TTL_HOURS)"
				      : "run %s has no artifact at that path; list them with GET "
					"/runs/{id}/artifacts",
			      id);
		return;
	}
	if (strcmp(PQgetvalue(res, 0, 0), "symlink") == 0) {
		struct json_object *d = json_object_new_object();
		json_object_object_add(d, "path", json_object_new_string(path));
		json_object_object_add(d, "type", json_object_new_string("symlink"));
		respond_error(r, 400, "invalid_request", d,
			      "%s is a symlink: artifacts list symlinks, never serve them", path);
		return;
	}
	int dir = artifacts_dir(id);
	int fd = dir >= 0 ? wspath_open(dir, path, O_RDONLY | O_NONBLOCK, 0) : -1;
	struct stat st;
	if (dir >= 0)
		close(dir);
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		if (fd >= 0)
			close(fd);
		respond_error(r, 404, "not_found", NULL, "artifact %s of run %s is gone", path, id);
		return;
	}
	wspath_url_encode(path, enc, sizeof(enc));
	(void)snprintf(accel, sizeof(accel), "/_files/runs/%s/artifacts/%s", id, enc);
	respond_download(r, fd, accel, path);
	close(fd);
}
