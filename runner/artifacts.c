/* artifacts.c: after the run's processes are gone, files of its workspace
 * matching capture_patterns are copied to DATA_ROOT/runs/<id>/artifacts
 * (root:api-group, 0640: nginx and the api read them, the sandbox never
 * sees them) and recorded in `artifacts`.
 *
 * Patterns match the workspace-relative path: `*` and `?` stay within a
 * segment, `**` crosses segments (`dist/` + `**` is all of dist; `**`, a
 * slash and `*.json` is every JSON file at any depth), `[...]` classes as
 * fnmatch. The walk never follows a symlink: a symlink that
 * matches is recorded as metadata (type symlink, its target, size 0).
 * Bytes are bounded by SANDBOX_MAX_ARTIFACT_BYTES_PER_RUN_MB, what the user
 * has left of SANDBOX_MAX_ARTIFACT_BYTES_PER_USER_MB and
 * SANDBOX_MAX_ARTIFACT_FILES; a file that does not fit is skipped and the
 * run says `artifacts_truncated`. */
#include "supervisor.h"
#include "../lib/config.h"
#include "../lib/log.h"
#include "../lib/util.h"
#include "../lib/wspath.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

bool artifact_glob(const char *pat, const char *path)
{
	if (strncmp(pat, "**", 2) == 0) {
		const char *rest = pat + 2;
		if (*rest == '/') {
			/* "**" + "/x": x here or below any directory. */
			rest++;
			for (const char *p = path;; p++) {
				if ((p == path || p[-1] == '/') && artifact_glob(rest, p))
					return true;
				if (!*p)
					return false;
			}
		}
		if (!*rest)
			return true; /* a trailing "**": everything below */
		for (const char *p = path;; p++) {
			if (artifact_glob(rest, p))
				return true;
			if (!*p)
				return false;
		}
	}
	/* Up to the next "**", match segment-wise with fnmatch. */
	const char *star2 = strstr(pat, "**");
	if (!star2)
		return fnmatch(pat, path, FNM_PATHNAME) == 0;
	size_t plen = (size_t)(star2 - pat);
	char head[512];
	if (plen >= sizeof(head))
		return false;
	memcpy(head, pat, plen);
	head[plen] = '\0';
	/* head ends in '/' (or is a partial segment); try every prefix of
	 * path that ends at a segment boundary. */
	for (size_t n = 0; n <= strlen(path); n++) {
		if (n != strlen(path) && n > 0 && path[n - 1] != '/')
			continue;
		char pre[WSPATH_MAX + 1];
		if (n > WSPATH_MAX)
			return false;
		memcpy(pre, path, n);
		pre[n] = '\0';
		if (fnmatch(head, pre, FNM_PATHNAME) == 0 && artifact_glob(star2, path + n))
			return true;
	}
	return false;
}

struct capture {
	struct run *r;
	struct json_object *patterns;
	int out;         /* artifacts dir */
	int64_t budget;  /* bytes left */
	int files_left;
	gid_t gid;
	struct json_object *rows; /* [{path,type,size,target}] */
};

static bool matches(struct capture *c, const char *path)
{
	for (size_t i = 0; i < json_object_array_length(c->patterns); i++)
		if (artifact_glob(json_object_get_string(json_object_array_get_idx(c->patterns, i)),
				  path))
			return true;
	return false;
}

static void add_row(struct capture *c, const char *path, const char *type, int64_t size,
		    const char *target)
{
	struct json_object *o = json_object_new_object();
	json_object_object_add(o, "path", json_object_new_string(path));
	json_object_object_add(o, "type", json_object_new_string(type));
	json_object_object_add(o, "size", json_object_new_int64(size));
	if (target)
		json_object_object_add(o, "target", json_object_new_string(target));
	json_object_array_add(c->rows, o);
}

static void copy_file(struct capture *c, int dirfd, const char *name, const char *path,
		      const struct stat *st)
{
	if (c->files_left <= 0 || st->st_size > c->budget) {
		c->r->artifacts_truncated = true;
		return;
	}
	int in = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (in < 0)
		return;
	const char *leaf;
	int pd = wspath_parent(c->out, path, true, &leaf);
	int out = pd >= 0 ? openat(pd, leaf, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
				   0640)
			  : -1;
	if (pd >= 0)
		close(pd);
	if (out < 0) {
		close(in);
		return;
	}
	off_t off = 0;
	while (off < st->st_size) {
		ssize_t n = sendfile(out, in, &off, (size_t)(st->st_size - off));
		if (n <= 0)
			break;
	}
	(void)!fchown(out, 0, c->gid);
	close(in);
	close(out);
	c->budget -= off;
	c->files_left--;
	c->r->artifact_bytes += off;
	add_row(c, path, "file", off, NULL);
}

static void walk(struct capture *c, int dirfd, const char *prefix, int depth)
{
	int fd = dup(dirfd);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *de;

	if (!d) {
		if (fd >= 0)
			close(fd);
		return;
	}
	while ((de = readdir(d)) != NULL) {
		struct stat st;
		char path[WSPATH_MAX + 1];
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (snprintf(path, sizeof(path), "%s%s%s", prefix, *prefix ? "/" : "",
			     de->d_name) >= (int)sizeof(path))
			continue;
		if (fstatat(dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (S_ISDIR(st.st_mode)) {
			if (depth >= 32)
				continue;
			int sub = wspath_open(dirfd, de->d_name, O_RDONLY | O_DIRECTORY, 0);
			if (sub >= 0) {
				walk(c, sub, path, depth + 1);
				close(sub);
			}
		} else if (!matches(c, path)) {
			continue;
		} else if (S_ISREG(st.st_mode)) {
			copy_file(c, dirfd, de->d_name, path, &st);
		} else if (S_ISLNK(st.st_mode)) {
			char target[WSPATH_MAX + 1];
			ssize_t n = readlinkat(dirfd, de->d_name, target, sizeof(target) - 1);
			if (n < 0 || c->files_left <= 0)
				continue;
			target[n] = '\0';
			c->files_left--;
			add_row(c, path, "symlink", 0, target);
		}
	}
	closedir(d);
}

static int64_t user_bytes_used(struct run *r)
{
	const char *p[] = { r->user_id };
	PGresult *res = db_exec(&sup->db,
				"SELECT coalesce(sum(artifact_bytes), 0) FROM runs WHERE user_id = $1"
				" AND artifacts_expired_at IS NULL",
				1, p);
	int64_t used = res ? atoll(PQgetvalue(res, 0, 0)) : INT64_MAX / 2;
	if (res)
		PQclear(res);
	return used;
}

void artifacts_capture(struct run *r)
{
	struct json_object *pats = NULL;
	char dir[600];

	if (!json_object_object_get_ex(r->row, "capture_patterns", &pats) || !pats ||
	    !json_object_is_type(pats, json_type_array) || json_object_array_length(pats) == 0 ||
	    !r->ws[0])
		return;
	int ws = open(r->ws, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (ws < 0)
		return;
	uid_t u;
	gid_t g;
	api_ids(&u, &g);
	(void)snprintf(dir, sizeof(dir), "%s/artifacts", r->dir);
	if (mkdir(dir, 0750) < 0 && errno != EEXIST) {
		close(ws);
		return;
	}
	(void)!chown(dir, 0, g);
	int64_t per_run = cfg_int(CFG_MAX_ARTIFACT_BYTES_PER_RUN_MB) * 1024 * 1024;
	int64_t per_user = cfg_int(CFG_MAX_ARTIFACT_BYTES_PER_USER_MB) * 1024 * 1024 -
			   user_bytes_used(r);
	struct capture c = {
		.r = r, .patterns = pats, .gid = g, .rows = json_object_new_array(),
		.budget = per_run < per_user ? per_run : per_user,
		.files_left = (int)cfg_int(CFG_MAX_ARTIFACT_FILES),
		.out = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC),
	};
	if (c.budget < 0)
		c.budget = 0;
	if (c.out >= 0) {
		/* Directories the copy creates are the api group's to read. */
		mode_t old = umask(027);
		walk(&c, ws, "", 0);
		umask(old);
		close(c.out);
		(void)workspace_chown(dir, 0, g);
	}
	close(ws);
	if (json_object_array_length(c.rows) > 0) {
		const char *p[] = { r->id, json_object_to_json_string_ext(c.rows, JSON_C_TO_STRING_PLAIN) };
		if (!db_command(&sup->db,
				"INSERT INTO artifacts (run_id, path, type, size, target) "
				"SELECT $1::uuid, e->>'path', e->>'type', (e->>'size')::bigint, e->>'target' "
				"FROM jsonb_array_elements($2::jsonb) e ON CONFLICT DO NOTHING",
				2, p))
			log_msg(LOG_LVL_ERROR, run_fields(r),
				"recording artifacts: %s", sup->db.last_error);
	}
	log_msg(LOG_LVL_INFO, run_fields(r),
		"artifacts: %zu captured, %lld bytes%s", json_object_array_length(c.rows),
		(long long)r->artifact_bytes, r->artifacts_truncated ? " (truncated by a cap)" : "");
	json_object_put(c.rows);
}
