/* workspace.c: a run's /workspace is a tmpfs the supervisor mounts on the
 * host with size=SANDBOX_WORKSPACE_CAP_MB, so the kernel enforces the cap
 * (ENOSPC inside the run), and bind-mounts into the sandbox with
 * noexec,nosuid,nodev. A one-shot run gets its own
 * (DATA_ROOT/runs/<id>/workspace), unmounted when it ends; a run in a
 * session uses the session's (DATA_ROOT/sessions/<sid>/workspace, see
 * sessions.c): given to the run's uid before it starts and back to the
 * api's user when it ends, so the next run, an upload or a download finds
 * every file the run left. Inline files are written into it before the
 * run starts, through openat2 below the workspace (a symlink a previous
 * run planted is never followed, by a process that is root). */
#include "supervisor.h"
#include "../lib/config.h"
#include "../lib/log.h"
#include "../lib/util.h"
#include "../lib/wspath.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <pwd.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>

static unsigned char *b64decode(const char *in, size_t *outlen)
{
	size_t n = strlen(in);
	unsigned char *out = xcalloc(1, n / 4 * 3 + 4);
	int len = EVP_DecodeBlock(out, (const unsigned char *)in, (int)n);

	if (len < 0) {
		free(out);
		return NULL;
	}
	/* EVP_DecodeBlock counts padding as zero bytes. */
	while (n > 0 && in[n - 1] == '=') {
		n--;
		len--;
	}
	*outlen = (size_t)len;
	return out;
}

/* Write rel below the workspace (its parents created) as uid. */
static int write_file(int ws, const char *rel, const unsigned char *data, size_t len,
		      uid_t uid, char *err, size_t errlen)
{
	const char *why, *leaf;

	if (wspath_check(rel, 10, &why) < 0) {
		(void)snprintf(err, errlen, "unsafe file path %s: %s", rel, why);
		return -1;
	}
	int pd = wspath_parent(ws, rel, true, &leaf);
	if (pd < 0) {
		(void)snprintf(err, errlen, "create %s: %s", rel, strerror(errno));
		return -1;
	}
	int fd = openat(pd, leaf, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
	close(pd);
	if (fd < 0) {
		(void)snprintf(err, errlen, "create %s: %s", rel, strerror(errno));
		return -1;
	}
	ssize_t w = len ? write(fd, data, len) : 0;
	int saved = errno;
	(void)!fchown(fd, uid, uid);
	close(fd);
	if (w != (ssize_t)len) {
		(void)snprintf(err, errlen, "write %s: %s", rel,
			       w < 0 ? strerror(saved) : "short write");
		return -1;
	}
	return 0;
}

void api_ids(uid_t *uid, gid_t *gid)
{
	static uid_t u = (uid_t)-1;
	static gid_t g = (gid_t)-1;

	if (u == (uid_t)-1) {
		struct passwd *pw = getpwnam(cfg_str(CFG_API_USER));
		u = pw ? pw->pw_uid : 65534;
		g = pw ? pw->pw_gid : 65534;
	}
	*uid = u;
	*gid = g;
}

static uid_t chown_uid;
static gid_t chown_gid;

static int chown_one(const char *path, const struct stat *st, int flag, struct FTW *f)
{
	(void)f;
	if (flag == FTW_NS)
		return 0;
	(void)!lchown(path, chown_uid, chown_gid);
	/* nosuid makes them inert; cleared all the same. */
	if (S_ISREG(st->st_mode) && (st->st_mode & (S_ISUID | S_ISGID)))
		(void)chmod(path, st->st_mode & 0777);
	return 0;
}

int workspace_chown(const char *dir, uid_t uid, gid_t gid)
{
	chown_uid = uid;
	chown_gid = gid;
	/* FTW_PHYS: symlinks are changed, never followed; FTW_MOUNT: never
	 * leaves the workspace's tmpfs. The sandbox is not running. */
	return nftw(dir, chown_one, 64, FTW_PHYS | FTW_MOUNT);
}

int workspace_create(struct run *r, char *err, size_t errlen)
{
	char opts[128];
	uid_t owner = r->host_base + r->uid;
	struct json_object *files = NULL;

	if (r->session_id[0]) {
		char root[560];
		session_dir(r->session_id, root, sizeof(root));
		(void)snprintf(r->ws, sizeof(r->ws), "%s/workspace", root);
		if (workspace_chown(r->ws, owner, owner) < 0) {
			(void)snprintf(err, errlen, "the session's workspace is gone: %s",
				       strerror(errno));
			return -1;
		}
	} else {
		(void)snprintf(r->ws, sizeof(r->ws), "%s/workspace", r->dir);
		if (mkdir(r->ws, 0700) < 0 && errno != EEXIST) {
			(void)snprintf(err, errlen, "mkdir workspace: %s", strerror(errno));
			return -1;
		}
		(void)snprintf(opts, sizeof(opts), "size=%lldm,mode=0700,uid=%u,gid=%u",
			       (long long)cfg_int(CFG_WORKSPACE_CAP_MB), (unsigned)owner,
			       (unsigned)owner);
		if (mount("sandbox-ws", r->ws, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, opts) < 0) {
			(void)snprintf(err, errlen, "mount workspace: %s", strerror(errno));
			return -1;
		}
	}
	int wsfd = open(r->ws, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (wsfd < 0) {
		(void)snprintf(err, errlen, "open workspace: %s", strerror(errno));
		return -1;
	}
	json_object_object_get_ex(r->row, "files", &files);
	for (size_t i = 0; files && i < json_object_array_length(files); i++) {
		struct json_object *f = json_object_array_get_idx(files, i), *p, *c;
		if (!json_object_object_get_ex(f, "path", &p) ||
		    !json_object_object_get_ex(f, "content_b64", &c)) {
			(void)snprintf(err, errlen, "files[%zu] malformed", i);
			close(wsfd);
			return -1;
		}
		size_t len = 0;
		unsigned char *data = b64decode(json_object_get_string(c), &len);
		if (!data) {
			(void)snprintf(err, errlen, "files[%zu]: bad base64", i);
			close(wsfd);
			return -1;
		}
		int rc = write_file(wsfd, json_object_get_string(p), data, len, owner, err, errlen);
		free(data);
		if (rc < 0) {
			close(wsfd);
			return -1;
		}
	}
	close(wsfd);
	return 0;
}

void workspace_return(struct run *r)
{
	uid_t u;
	gid_t g;

	if (!r->ws[0] || !r->session_id[0])
		return;
	api_ids(&u, &g);
	(void)workspace_chown(r->ws, u, g);
}

void workspace_release(struct run *r)
{
	if (!r->ws[0] || r->session_id[0])
		return;
	if (umount2(r->ws, MNT_DETACH) < 0 && errno != EINVAL && errno != ENOENT)
		log_warn("umount %s: %s", r->ws, strerror(errno));
	(void)rmdir(r->ws);
}

/* Unmount every workspace tmpfs below DATA_ROOT/runs of no live run
 * (after a crash: all of them; later, from the reaper). */
void workspace_cleanup_leftovers(void)
{
	char prefix[600], line[4096];
	FILE *f = fopen("/proc/self/mountinfo", "re");

	if (!f)
		return;
	(void)snprintf(prefix, sizeof(prefix), "%s/runs/", cfg_str(CFG_DATA_ROOT));
	while (fgets(line, sizeof(line), f)) {
		char mnt[2048];
		/* id parent major:minor root mountpoint ... */
		if (sscanf(line, "%*s %*s %*s %*s %2047s", mnt) != 1)
			continue;
		if (strncmp(mnt, prefix, strlen(prefix)) != 0)
			continue;
		if (strlen(mnt + strlen(prefix)) >= 36 && run_local(mnt + strlen(prefix)))
			continue;
		if (umount2(mnt, MNT_DETACH) == 0)
			log_msg(LOG_LVL_INFO, log_fields("mount", mnt, NULL),
				"unmounted an orphaned workspace");
	}
	fclose(f);
}
