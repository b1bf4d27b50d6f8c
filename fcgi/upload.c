/* upload.c: see upload.h. */
#include "upload.h"
#include "metrics.h"
#include "multipart.h"
#include "router.h"
#include "sessions.h"
#include "../lib/wspath.h"
#include "../lib/config.h"
#include "../lib/crypto.h"
#include "../lib/log.h"
#include "../lib/util.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_REJECTED_LISTED 100
/* Tiny archives compress well; the ratio applies above this floor. */
#define RATIO_FLOOR_BYTES (64 * 1024)

struct entry {
	char *path;
	bool dir;
};

/* One upload in progress: its staging directory and what it has done. */
struct stager {
	struct request *r;
	int root, ws, stage;
	char stage_name[48];
	int64_t body_bytes, expanded, max_expanded, max_ratio_bytes;
	int files, entries, max_files, max_depth;
	struct entry *list;
	size_t nlist, caplist;
	struct json_object *rejected; /* [{entry, reason}] */
	int nrejected;
	/* A limit that ends the upload at once (413 / 507). */
	const char *stop_reason;
	bool full;
	int io_errno;
};

static void reject(struct stager *st, const char *entry, const char *reason)
{
	st->nrejected++;
	if (json_object_array_length(st->rejected) >= MAX_REJECTED_LISTED)
		return;
	struct json_object *o = json_object_new_object();
	json_object_object_add(o, "entry", json_object_new_string(entry));
	json_object_object_add(o, "reason", json_object_new_string(reason));
	json_object_array_add(st->rejected, o);
}

static void remember(struct stager *st, const char *path, bool dir)
{
	if (st->nlist == st->caplist) {
		st->caplist = st->caplist ? st->caplist * 2 : 64;
		st->list = realloc(st->list, st->caplist * sizeof(*st->list));
		if (!st->list)
			abort();
	}
	st->list[st->nlist].path = xstrdup(path);
	st->list[st->nlist].dir = dir;
	st->nlist++;
}

static int stage_begin(struct stager *st, struct request *r, int ws, int root)
{
	unsigned char rnd[8];

	memset(st, 0, sizeof(*st));
	st->r = r;
	st->ws = ws;
	st->root = root;
	st->stage = -1;
	st->rejected = json_object_new_array();
	st->max_files = (int)cfg_int(CFG_MAX_UPLOAD_FILES);
	st->max_depth = (int)cfg_int(CFG_MAX_UPLOAD_DEPTH);
	st->max_expanded = cfg_int(CFG_MAX_UPLOAD_EXPANDED_MB) * 1024 * 1024;
	random_bytes(rnd, sizeof(rnd));
	(void)mkdirat(root, ".staging", 0700);
	int sd = wspath_open(root, ".staging", O_RDONLY | O_DIRECTORY, 0);
	if (sd < 0)
		return -1;
	(void)snprintf(st->stage_name, sizeof(st->stage_name), "%02x%02x%02x%02x%02x%02x%02x%02x",
		       rnd[0], rnd[1], rnd[2], rnd[3], rnd[4], rnd[5], rnd[6], rnd[7]);
	if (mkdirat(sd, st->stage_name, 0700) < 0) {
		close(sd);
		return -1;
	}
	st->stage = wspath_open(sd, st->stage_name, O_RDONLY | O_DIRECTORY, 0);
	close(sd);
	return st->stage < 0 ? -1 : 0;
}

/* Remove the staging directory whatever happened. */
static void stage_end(struct stager *st)
{
	if (st->stage >= 0)
		close(st->stage);
	int sd = wspath_open(st->root, ".staging", O_RDONLY | O_DIRECTORY, 0);
	if (sd >= 0) {
		(void)wspath_remove_tree(sd, st->stage_name);
		close(sd);
	}
	for (size_t i = 0; i < st->nlist; i++)
		free(st->list[i].path);
	free(st->list);
	json_object_put(st->rejected);
}

static void note_io_error(struct stager *st, int e)
{
	if (e == ENOSPC || e == EDQUOT)
		st->full = true;
	else if (!st->io_errno)
		st->io_errno = e;
}

/* Account n more expanded bytes; false when a limit ends the upload. */
static bool account(struct stager *st, int64_t n)
{
	st->expanded += n;
	if (st->expanded > st->max_expanded) {
		st->stop_reason = "expanded_bytes";
		return false;
	}
	if (st->max_ratio_bytes && st->expanded > st->max_ratio_bytes) {
		st->stop_reason = "expansion_ratio";
		return false;
	}
	return true;
}

/* Check an entry's name and kind; the clean path into out. */
static bool entry_ok(struct stager *st, const char *name, mode_t type, mode_t mode,
		     bool hardlink, char *out, size_t outlen, bool *is_dir)
{
	const char *why = NULL;

	if (++st->entries > 2 * st->max_files + 16) {
		st->stop_reason = "file_count";
		return false;
	}
	if (wspath_entry(name, st->max_depth, out, outlen, is_dir, &why) < 0) {
		reject(st, name, why);
		return false;
	}
	if (hardlink)
		why = "hardlink";
	else if (type == AE_IFLNK)
		why = "symlink";
	else if (type == AE_IFCHR || type == AE_IFBLK)
		why = "device node";
	else if (type == AE_IFIFO)
		why = "fifo";
	else if (type == AE_IFSOCK)
		why = "socket";
	else if (type != AE_IFREG && type != AE_IFDIR)
		why = "unsupported entry type";
	else if (mode & (S_ISUID | S_ISGID))
		why = "setuid/setgid bit";
	if (why) {
		reject(st, name, why);
		return false;
	}
	if (type == AE_IFDIR)
		*is_dir = true;
	if (!*is_dir && ++st->files > st->max_files) {
		st->stop_reason = "file_count";
		return false;
	}
	return true;
}

/* Create the staged file (its parents too); -1 when it cannot be. */
static int stage_open(struct stager *st, const char *path, mode_t mode)
{
	const char *leaf;
	int pd = wspath_parent(st->stage, path, true, &leaf);

	if (pd < 0) {
		if (errno == ENOTDIR || errno == ELOOP || errno == EEXIST)
			reject(st, path, "conflicts with another entry of the upload");
		else
			note_io_error(st, errno);
		return -1;
	}
	int fd = openat(pd, leaf, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC,
			(mode & 0111) ? 0755 : 0644);
	if (fd < 0) {
		if (errno == EISDIR || errno == ELOOP)
			reject(st, path, "conflicts with another entry of the upload");
		else
			note_io_error(st, errno);
	}
	close(pd);
	if (fd >= 0)
		remember(st, path, false);
	return fd;
}

static void stage_dir(struct stager *st, const char *path)
{
	char probe[WSPATH_MAX + 3];
	const char *leaf;

	(void)snprintf(probe, sizeof(probe), "%s/_", path);
	int pd = wspath_parent(st->stage, probe, true, &leaf);
	if (pd < 0) {
		reject(st, path, "conflicts with another entry of the upload");
		return;
	}
	close(pd);
	remember(st, path, true);
}

static bool write_all(struct stager *st, int fd, const void *buf, size_t n)
{
	const char *p = buf;

	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			note_io_error(st, errno);
			return false;
		}
		p += w;
		n -= (size_t)w;
	}
	return true;
}

/* ---- archives (libarchive) ---- */

static bool stage_archive(struct stager *st, int body_fd, bool zip)
{
	struct archive *a = archive_read_new();
	struct archive_entry *e;
	char path[WSPATH_MAX + 1];
	static char buf[64 * 1024];
	bool ok = true;

	if (zip) {
		archive_read_support_format_zip(a);
	} else {
		archive_read_support_filter_gzip(a);
		archive_read_support_filter_bzip2(a);
		archive_read_support_filter_xz(a);
		archive_read_support_format_tar(a);
		archive_read_support_format_gnutar(a);
	}
	if (archive_read_open_fd(a, body_fd, 64 * 1024) != ARCHIVE_OK) {
		reject(st, "(archive)", archive_error_string(a) ? archive_error_string(a)
								: "not a readable archive");
		archive_read_free(a);
		return false;
	}
	for (;;) {
		int rc = archive_read_next_header(a, &e);
		if (rc == ARCHIVE_EOF)
			break;
		if (rc < ARCHIVE_WARN) {
			reject(st, "(archive)", archive_error_string(a) ? archive_error_string(a)
									: "corrupt archive");
			ok = false;
			break;
		}
		/* Decompressed bytes count even when skipped: a bomb of empty
		 * entries ends here too. */
		if (archive_filter_bytes(a, 0) > st->max_expanded) {
			st->stop_reason = "expanded_bytes";
			break;
		}
		const char *name = archive_entry_pathname(e);
		bool is_dir = false;
		if (!name) {
			reject(st, "(unnamed entry)", "entry name is not valid text");
			continue;
		}
		if (!entry_ok(st, name, archive_entry_filetype(e), archive_entry_mode(e),
			      archive_entry_hardlink(e) != NULL, path, sizeof(path), &is_dir)) {
			if (st->stop_reason)
				break;
			continue;
		}
		if (is_dir) {
			if (!st->nrejected)
				stage_dir(st, path);
			continue;
		}
		if (archive_entry_size_is_set(e) && archive_entry_size(e) > st->max_expanded) {
			st->stop_reason = "expanded_bytes";
			break;
		}
		if (st->nrejected) /* refused already: only look for more offenders */
			continue;
		int fd = stage_open(st, path, archive_entry_mode(e));
		if (fd < 0) {
			if (st->full || st->io_errno)
				break;
			continue;
		}
		ssize_t n;
		while ((n = archive_read_data(a, buf, sizeof(buf))) > 0) {
			if (!account(st, n) || !write_all(st, fd, buf, (size_t)n))
				break;
		}
		close(fd);
		if (n < 0) {
			reject(st, path, archive_error_string(a) ? archive_error_string(a)
								: "corrupt entry data");
		}
		if (st->stop_reason || st->full || st->io_errno)
			break;
	}
	archive_read_free(a);
	return ok;
}

/* ---- multipart/form-data ---- */

static int on_part(void *ctx, const struct mp_part *p)
{
	struct stager *st = ctx;
	char path[WSPATH_MAX + 1];
	bool is_dir = false;

	if (!p->filename[0])
		return 0; /* a plain form field: not a file */
	if (strcmp(p->name, "files") != 0 && strcmp(p->name, "files[]") != 0 &&
	    strcmp(p->name, "file") != 0) {
		reject(st, p->filename, "file parts must be named \"files\"");
		return 0;
	}
	if (!entry_ok(st, p->filename, AE_IFREG, 0644, false, path, sizeof(path), &is_dir))
		return st->stop_reason ? 1 : 0;
	if (is_dir) {
		reject(st, p->filename, "a file name ending in '/'");
		return 0;
	}
	if (st->nrejected)
		return 0;
	if (!account(st, (int64_t)p->len))
		return 1;
	int fd = stage_open(st, path, 0644);
	if (fd < 0)
		return st->full || st->io_errno ? 1 : 0;
	bool ok = write_all(st, fd, p->data, p->len);
	close(fd);
	return ok ? 0 : 1;
}

/* ---- into place ---- */

static int cmp_entries(const void *a, const void *b)
{
	return strcmp(((const struct entry *)a)->path, ((const struct entry *)b)->path);
}

/* What is in the workspace at path: 0 none, 'd' dir, 'f' other; 'x'
 * when a parent is a file or a symlink (a sandboxed program can plant
 * those), so the entry cannot go there. */
static int ws_kind(int ws, const char *path)
{
	const char *leaf;
	struct stat st;
	int pd = wspath_parent(ws, path, false, &leaf);

	if (pd < 0)
		return errno == ENOENT ? 0 : 'x';
	int rc = fstatat(pd, leaf, &st, AT_SYMLINK_NOFOLLOW);
	close(pd);
	if (rc < 0)
		return 0;
	return S_ISDIR(st.st_mode) ? 'd' : 'f';
}

/* Check every entry against the workspace, then move them all. */
static bool commit(struct stager *st)
{
	if (st->nlist)
		qsort(st->list, st->nlist, sizeof(*st->list), cmp_entries);
	for (size_t i = 0; i < st->nlist; i++) {
		int k = ws_kind(st->ws, st->list[i].path);
		if (k == 'x' || (k == 'd' && !st->list[i].dir) || (k == 'f' && st->list[i].dir))
			reject(st, st->list[i].path,
			       "conflicts with what the workspace holds at that path");
	}
	if (st->nrejected)
		return false;
	for (size_t i = 0; i < st->nlist; i++) {
		const char *leaf, *sleaf;
		char probe[WSPATH_MAX + 3];
		if (st->list[i].dir) {
			(void)snprintf(probe, sizeof(probe), "%s/_", st->list[i].path);
			int pd = wspath_parent(st->ws, probe, true, &leaf);
			if (pd < 0) {
				note_io_error(st, errno);
				return false;
			}
			close(pd);
			continue;
		}
		int sp = wspath_parent(st->stage, st->list[i].path, false, &sleaf);
		int pd = wspath_parent(st->ws, st->list[i].path, true, &leaf);
		int rc = (sp >= 0 && pd >= 0) ? renameat(sp, sleaf, pd, leaf) : -1;
		int e = errno;
		if (sp >= 0)
			close(sp);
		if (pd >= 0)
			close(pd);
		if (rc < 0) {
			note_io_error(st, e);
			reject(st, st->list[i].path, strerror(e));
			return false;
		}
	}
	return true;
}

/* ---- the request body ---- */

/* The spooled body (nginx's $request_body_file), or the FastCGI stream
 * copied into the staging directory when nginx did not spool it. */
static int body_open(struct request *r, struct stager *st)
{
	const char *f = req_param(r, "REQUEST_BODY_FILE");
	struct stat sb;

	if (f && *f) {
		int fd = open(f, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		if (fd >= 0 && fstat(fd, &sb) == 0) {
			st->body_bytes = sb.st_size;
			return fd;
		}
		if (fd >= 0)
			close(fd);
		return -1;
	}
	int fd = openat(st->stage, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd < 0)
		return -1;
	char buf[64 * 1024];
	int n;
	int64_t max = cfg_int(CFG_MAX_UPLOAD_MB) * 1024 * 1024;
	while ((n = FCGX_GetStr(buf, sizeof(buf), r->fcgx->in)) > 0) {
		st->body_bytes += n;
		if (st->body_bytes > max || !write_all(st, fd, buf, (size_t)n)) {
			close(fd);
			errno = st->full ? ENOSPC : EFBIG;
			return -1;
		}
	}
	(void)lseek(fd, 0, SEEK_SET);
	return fd;
}

/* The answer for a stager that did not succeed; true if it answered. */
static bool answer_failure(struct stager *st)
{
	struct request *r = st->r;

	if (st->full) {
		/* What the upload took goes first: the usage reported is the
		 * workspace's own. */
		int sd = wspath_open(st->root, ".staging", O_RDONLY | O_DIRECTORY, 0);
		if (sd >= 0) {
			(void)wspath_remove_tree(sd, st->stage_name);
			close(sd);
		}
		respond_workspace_full(r, st->root);
		return true;
	}
	if (st->stop_reason) {
		struct json_object *d = json_object_new_object();
		json_object_object_add(d, "reason", json_object_new_string(st->stop_reason));
		if (strcmp(st->stop_reason, "file_count") == 0)
			json_object_object_add(d, "limit", json_object_new_int(st->max_files));
		else if (strcmp(st->stop_reason, "expansion_ratio") == 0)
			json_object_object_add(d, "limit",
					       json_object_new_int64(cfg_int(CFG_MAX_UPLOAD_RATIO)));
		else
			json_object_object_add(d, "limit_bytes", json_object_new_int64(st->max_expanded));
		respond_error(r, 413, "upload_too_large", d,
			      "the upload exceeds a limit (%s); nothing was written",
			      strcmp(st->stop_reason, "file_count") == 0 ? "too many files"
			      : strcmp(st->stop_reason, "expansion_ratio") == 0
				      ? "expansion ratio: a compression bomb?"
				      : "expanded size");
		return true;
	}
	if (st->nrejected) {
		struct json_object *d = json_object_new_object();
		json_object_object_add(d, "rejected", json_object_get(st->rejected));
		json_object_object_add(d, "count", json_object_new_int(st->nrejected));
		respond_error(r, 400, "unsafe_entries", d,
			      "the upload was refused (%d entr%s, e.g. %s); nothing was written",
			      st->nrejected, st->nrejected == 1 ? "y" : "ies",
			      json_object_get_string(json_object_object_get(
				      json_object_array_get_idx(st->rejected, 0), "reason")));
		return true;
	}
	if (st->io_errno) {
		respond_error(r, 500, "internal_error", NULL, "the upload failed: %s; nothing was written",
			      strerror(st->io_errno));
		return true;
	}
	return false;
}

enum kind { K_NONE, K_MULTIPART, K_TAR, K_ZIP };

static enum kind body_kind(const char *ct, char *boundary, size_t blen)
{
	static const char *const tars[] = {
		"application/x-tar", "application/tar", "application/gzip", "application/x-gzip",
		"application/x-compressed-tar", "application/x-bzip2", "application/x-xz",
		"application/x-gtar"
	};
	if (!ct)
		return K_NONE;
	if (multipart_boundary(ct, boundary, blen) == 0)
		return K_MULTIPART;
	size_t n = strcspn(ct, "; ");
	for (size_t i = 0; i < ARRAY_SIZE(tars); i++)
		if (strlen(tars[i]) == n && strncasecmp(ct, tars[i], n) == 0)
			return K_TAR;
	if (n == 15 && strncasecmp(ct, "application/zip", n) == 0)
		return K_ZIP;
	return K_NONE;
}

void h_files_upload(struct request *r)
{
	struct stager st;
	char boundary[80];
	int ws, root;
	const char *ct = req_param(r, "CONTENT_TYPE");
	enum kind kind = body_kind(ct, boundary, sizeof(boundary));

	if (kind == K_NONE) {
		struct json_object *d = json_object_new_object(), *a = json_object_new_array();
		json_object_array_add(a, json_object_new_string("multipart/form-data"));
		json_object_array_add(a, json_object_new_string("application/x-tar"));
		json_object_array_add(a, json_object_new_string("application/gzip"));
		json_object_array_add(a, json_object_new_string("application/x-bzip2"));
		json_object_array_add(a, json_object_new_string("application/x-xz"));
		json_object_array_add(a, json_object_new_string("application/zip"));
		json_object_object_add(d, "supported", a);
		respond_error(r, 415, "unsupported_media_type", d,
			      "upload as multipart/form-data (field \"files\"), a tar archive "
			      "(plain, gzip, bzip2, xz) or a zip archive");
		return;
	}
	if (session_workspace(r, r->params[0], true, &ws, &root) < 0)
		return;
	if (stage_begin(&st, r, ws, root) < 0) {
		int e = errno;
		if (e == ENOSPC)
			respond_workspace_full(r, root);
		else
			respond_error(r, 500, "internal_error", NULL, "staging failed: %s", strerror(e));
		goto out;
	}
	int body = body_open(r, &st);
	if (body < 0) {
		int e = errno;
		if (e == ENOSPC)
			st.full = true;
		if (!answer_failure(&st))
			respond_error(r, e == EFBIG ? 413 : 500, e == EFBIG ? "upload_too_large"
									   : "internal_error",
				      NULL, "the request body could not be read: %s", strerror(e));
		goto out;
	}
	st.max_ratio_bytes = (st.body_bytes > RATIO_FLOOR_BYTES ? st.body_bytes : RATIO_FLOOR_BYTES) *
			     cfg_int(CFG_MAX_UPLOAD_RATIO);
	if (kind == K_MULTIPART) {
		const char *why = NULL;
		void *map = st.body_bytes ? mmap(NULL, (size_t)st.body_bytes, PROT_READ, MAP_PRIVATE,
						 body, 0)
					  : NULL;
		if (st.body_bytes && map == MAP_FAILED) {
			close(body);
			respond_error(r, 500, "internal_error", NULL, "mmap: %s", strerror(errno));
			goto out;
		}
		int rc = multipart_parse(map, (size_t)st.body_bytes, boundary, on_part, &st, &why);
		if (map)
			munmap(map, (size_t)st.body_bytes);
		if (rc < 0) {
			close(body);
			respond_error(r, 400, "invalid_request", NULL, "malformed multipart body: %s", why);
			goto out;
		}
	} else {
		(void)stage_archive(&st, body, kind == K_ZIP);
	}
	close(body);
	if (answer_failure(&st))
		goto out;
	if (st.files == 0 && st.nlist == 0) {
		respond_error(r, 400, "invalid_request", NULL,
			      "the upload holds no file (multipart parts must be named \"files\")");
		goto out;
	}
	if (!commit(&st)) {
		if (!answer_failure(&st))
			respond_error(r, 500, "internal_error", NULL, "the upload could not be moved");
		goto out;
	}
	metrics_upload(kind == K_MULTIPART ? UPLOAD_MULTIPART : kind == K_ZIP ? UPLOAD_ZIP : UPLOAD_TAR,
		       st.body_bytes, st.files);
	log_msg(LOG_LVL_INFO, log_fields("session_id", r->params[0], "event", "upload", NULL),
		"upload: %d files, %lld bytes received, %lld expanded", st.files,
		(long long)st.body_bytes, (long long)st.expanded);
	struct json_object *o = json_object_new_object();
	json_object_object_add(o, "session_id", json_object_new_string(r->params[0]));
	json_object_object_add(o, "bytes_received", json_object_new_int64(st.body_bytes));
	json_object_object_add(o, "file_count", json_object_new_int(st.files));
	json_object_object_add(o, "bytes_written", json_object_new_int64(st.expanded));
	json_object_object_add(o, "kind", json_object_new_string(kind == K_MULTIPART ? "multipart"
								: kind == K_ZIP ? "zip" : "tar"));
	respond_json(r, 201, o);
out:
	stage_end(&st);
	close(ws);
	close(root);
}

int upload_single(struct request *r, int ws, int root, const char *path,
		  struct upload_result *res)
{
	struct stager st;
	int rc = -1;

	memset(res, 0, sizeof(*res));
	if (stage_begin(&st, r, ws, root) < 0) {
		stage_end(&st);
		respond_error(r, 500, "internal_error", NULL, "staging failed: %s", strerror(errno));
		return -1;
	}
	int body = body_open(r, &st);
	if (body < 0) {
		if (errno == ENOSPC)
			st.full = true;
		if (!answer_failure(&st))
			respond_error(r, errno == EFBIG ? 413 : 500,
				      errno == EFBIG ? "upload_too_large" : "internal_error", NULL,
				      "the request body could not be read: %s", strerror(errno));
		goto out;
	}
	bool is_dir;
	char clean[WSPATH_MAX + 1];
	if (entry_ok(&st, path, AE_IFREG, 0644, false, clean, sizeof(clean), &is_dir)) {
		int fd = stage_open(&st, clean, 0644);
		if (fd >= 0) {
			off_t off = 0;
			while (off < st.body_bytes) {
				ssize_t n = sendfile(fd, body, &off, (size_t)(st.body_bytes - off));
				if (n <= 0) {
					note_io_error(&st, n < 0 ? errno : EIO);
					break;
				}
			}
			st.expanded = off;
			close(fd);
		}
	}
	close(body);
	if (answer_failure(&st))
		goto out;
	if (!commit(&st)) {
		if (!answer_failure(&st))
			respond_error(r, 500, "internal_error", NULL, "the file could not be moved");
		goto out;
	}
	metrics_upload(UPLOAD_PUT, st.body_bytes, 1);
	res->bytes_received = st.body_bytes;
	res->bytes_written = st.expanded;
	res->file_count = 1;
	rc = 0;
out:
	stage_end(&st);
	return rc;
}
