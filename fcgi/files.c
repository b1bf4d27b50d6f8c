/* files.c: a session's workspace files (seeds 001, 003, 004).
 *   GET    /sessions/{id}/files[?path=dir&depth=n&limit=n]  list
 *   GET    /sessions/{id}/files/{path}                      download (nginx)
 *   PUT    /sessions/{id}/files/{path}                      write one file
 *   DELETE /sessions/{id}/files/{path}                      remove
 * Paths are validated (wspath) and resolved below the workspace without
 * following symlinks; symlinks are listed, never served or traversed. */
#include "download.h"
#include "router.h"
#include "sessions.h"
#include "upload.h"
#include "../lib/wspath.h"
#include "../lib/config.h"
#include "../lib/log.h"
#include "../lib/util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *type_name(mode_t m)
{
	if (S_ISREG(m))
		return "file";
	if (S_ISDIR(m))
		return "dir";
	if (S_ISLNK(m))
		return "symlink";
	return "other";
}

struct lister {
	struct json_object *items;
	int max_depth;
	int64_t limit, count;
	bool truncated;
};

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Depth-first, names sorted, never through a symlink. */
static void list_dir(struct lister *l, int dirfd, const char *prefix, int depth)
{
	int fd = dup(dirfd);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	char **names = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;

	if (!d) {
		if (fd >= 0)
			close(fd);
		return;
	}
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 64;
			names = realloc(names, cap * sizeof(*names));
			if (!names)
				abort();
		}
		names[n++] = xstrdup(de->d_name);
		if ((int64_t)n > l->limit + 1) /* enough to know it is cut */
			break;
	}
	closedir(d);
	if (n)
		qsort(names, n, sizeof(*names), cmp_names);
	for (size_t i = 0; i < n; i++) {
		struct stat st;
		char path[WSPATH_MAX * 2];
		if (l->count >= l->limit) {
			l->truncated = true;
			break;
		}
		if (fstatat(dirfd, names[i], &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		(void)snprintf(path, sizeof(path), "%s%s%s", prefix, *prefix ? "/" : "", names[i]);
		struct json_object *e = json_object_new_object();
		json_object_object_add(e, "path", json_object_new_string(path));
		json_object_object_add(e, "type", json_object_new_string(type_name(st.st_mode)));
		json_object_object_add(e, "size",
				       json_object_new_int64(S_ISREG(st.st_mode) ? st.st_size : 0));
		char ts[32];
		rfc3339_utc(st.st_mtime, ts);
		json_object_object_add(e, "mtime", json_object_new_string(ts));
		json_object_array_add(l->items, e);
		l->count++;
		if (S_ISDIR(st.st_mode)) {
			if (depth >= l->max_depth) {
				l->truncated = true;
				continue;
			}
			int sub = wspath_open(dirfd, names[i], O_RDONLY | O_DIRECTORY, 0);
			if (sub >= 0) {
				list_dir(l, sub, path, depth + 1);
				close(sub);
			}
		}
	}
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

void h_files_list(struct request *r)
{
	int ws, root;
	int64_t depth = cfg_int(CFG_MAX_UPLOAD_DEPTH), limit = cfg_int(CFG_FILES_LIST_MAX);
	const char *why;
	char dir[WSPATH_MAX + 1] = "";
	_cleanup_free_ char *qp = req_query(r, "path"), *qd = req_query(r, "depth"),
			    *ql = req_query(r, "limit");

	if ((qd && parse_i64(qd, 0, 64, &depth, &why) < 0) ||
	    (ql && parse_i64(ql, 1, cfg_int(CFG_FILES_LIST_MAX), &limit, &why) < 0)) {
		respond_error(r, 400, "invalid_request", NULL,
			      "depth must be 0..64 and limit 1..%lld",
			      (long long)cfg_int(CFG_FILES_LIST_MAX));
		return;
	}
	if (qp && *qp && strcmp(qp, ".") != 0) {
		if (wspath_check(qp, 64, &why) < 0) {
			struct json_object *d = json_object_new_object();
			json_object_object_add(d, "field", json_object_new_string("path"));
			json_object_object_add(d, "reason", json_object_new_string(why));
			respond_error(r, 400, "invalid_request", d, "invalid path: %s", why);
			return;
		}
		(void)strlcpy_ok(dir, qp, sizeof(dir));
	}
	if (session_workspace(r, r->params[0], false, &ws, &root) < 0)
		return;
	int fd = *dir ? wspath_open(ws, dir, O_RDONLY | O_DIRECTORY, 0) : dup(ws);
	if (fd < 0) {
		int e = errno;
		close(ws);
		close(root);
		if (e == ENOTDIR || e == ELOOP)
			respond_error(r, 400, "invalid_request", NULL,
				      "%s is not a directory (symlinks are not followed)", dir);
		else
			respond_error(r, 404, "not_found", NULL, "no directory %s in the workspace", dir);
		return;
	}
	struct lister l = { .items = json_object_new_array(), .max_depth = (int)depth,
			    .limit = limit };
	list_dir(&l, fd, dir, 0);
	close(fd);
	struct json_object *o = json_object_new_object();
	json_object_object_add(o, "session_id", json_object_new_string(r->params[0]));
	json_object_object_add(o, "path", json_object_new_string(dir));
	json_object_object_add(o, "items", l.items);
	json_object_object_add(o, "count", json_object_new_int64(l.count));
	json_object_object_add(o, "truncated", json_object_new_boolean(l.truncated));
	json_object_object_add(o, "used_bytes", json_object_new_int64(session_used_bytes(root)));
	json_object_object_add(o, "cap_mb", json_object_new_int64(cfg_int(CFG_WORKSPACE_CAP_MB)));
	close(ws);
	close(root);
	respond_json(r, 200, o);
}

static void respond_not_regular(struct request *r, const char *path, mode_t m)
{
	struct json_object *d = json_object_new_object();
	json_object_object_add(d, "path", json_object_new_string(path));
	json_object_object_add(d, "type", json_object_new_string(type_name(m)));
	respond_error(r, 400, "invalid_request", d,
		      S_ISLNK(m) ? "%s is a symlink: symlinks are listed, never served or followed"
				 : "%s is not a regular file",
		      path);
}

void h_file_get(struct request *r)
{
	char path[WSPATH_MAX + 1], enc[WSPATH_MAX * 3 + 1], accel[WSPATH_MAX * 3 + 200];
	int ws, root;
	struct stat st;

	if (download_path(r, r->params[1], 64, path, sizeof(path)) < 0 ||
	    session_workspace(r, r->params[0], false, &ws, &root) < 0)
		return;
	int fd = wspath_open(ws, path, O_RDONLY | O_NONBLOCK, 0);
	int e = errno;
	if (fd < 0 && e == ELOOP) {
		const char *leaf;
		int pd = wspath_parent(ws, path, false, &leaf);
		if (pd >= 0 && fstatat(pd, leaf, &st, AT_SYMLINK_NOFOLLOW) == 0) {
			close(pd);
			close(ws);
			close(root);
			respond_not_regular(r, path, st.st_mode);
			return;
		}
		if (pd >= 0)
			close(pd);
	}
	close(ws);
	close(root);
	if (fd < 0) {
		respond_error(r, 404, "not_found", NULL, "no file %s in the workspace", path);
		return;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		respond_not_regular(r, path, st.st_mode);
		return;
	}
	wspath_url_encode(path, enc, sizeof(enc));
	(void)snprintf(accel, sizeof(accel), "/_files/sessions/%s/workspace/%s", r->params[0], enc);
	respond_download(r, fd, accel, path);
	close(fd);
}

void h_file_put(struct request *r)
{
	char path[WSPATH_MAX + 1];
	int ws, root;

	if (download_path(r, r->params[1], (int)cfg_int(CFG_MAX_UPLOAD_DEPTH), path, sizeof(path)) < 0 ||
	    session_workspace(r, r->params[0], true, &ws, &root) < 0)
		return;
	struct upload_result res;
	if (upload_single(r, ws, root, path, &res) == 0) {
		struct json_object *o = json_object_new_object();
		json_object_object_add(o, "session_id", json_object_new_string(r->params[0]));
		json_object_object_add(o, "path", json_object_new_string(path));
		json_object_object_add(o, "size", json_object_new_int64(res.bytes_written));
		json_object_object_add(o, "bytes_received", json_object_new_int64(res.bytes_received));
		respond_json(r, 201, o);
	}
	close(ws);
	close(root);
}

void h_file_delete(struct request *r)
{
	char path[WSPATH_MAX + 1];
	int ws, root;
	struct stat st;
	const char *leaf;

	if (download_path(r, r->params[1], 64, path, sizeof(path)) < 0 ||
	    session_workspace(r, r->params[0], true, &ws, &root) < 0)
		return;
	int pd = wspath_parent(ws, path, false, &leaf);
	close(ws);
	close(root);
	if (pd < 0 || fstatat(pd, leaf, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		if (pd >= 0)
			close(pd);
		respond_error(r, 404, "not_found", NULL, "no file %s in the workspace", path);
		return;
	}
	int rc = wspath_remove_tree(pd, leaf);
	int e = errno;
	close(pd);
	if (rc < 0) {
		respond_error(r, 500, "internal_error", NULL, "could not remove %s: %s", path,
			      strerror(e));
		return;
	}
	struct json_object *o = json_object_new_object();
	json_object_object_add(o, "session_id", json_object_new_string(r->params[0]));
	json_object_object_add(o, "path", json_object_new_string(path));
	json_object_object_add(o, "type", json_object_new_string(type_name(st.st_mode)));
	json_object_object_add(o, "deleted", json_object_new_boolean(1));
	respond_json(r, 200, o);
}
