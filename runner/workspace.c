/* workspace.c: a run's /workspace is a tmpfs the supervisor mounts on the
 * host (DATA_ROOT/runs/<id>/workspace) with size=SANDBOX_WORKSPACE_CAP_MB,
 * so the kernel enforces the cap (ENOSPC inside the run), and bind-mounts
 * into the sandbox with noexec,nosuid,nodev. Inline files are written
 * into it before the run starts, owned by the run's uid. */
#include "supervisor.h"
#include "../lib/config.h"
#include "../lib/log.h"
#include "../lib/util.h"

#include <errno.h>
#include <fcntl.h>
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

/* Create parent directories of rel inside base (a fresh tmpfs nobody else
 * can see yet), owned by uid. The path was validated by the api; it is
 * checked again here because the supervisor trusts no row blindly. */
static int write_file(const char *base, const char *rel, const unsigned char *data,
		      size_t len, uid_t uid, char *err, size_t errlen)
{
	char path[1024];

	if (rel[0] == '/' || strstr(rel, "..") || strlen(base) + strlen(rel) + 2 > sizeof(path)) {
		(void)snprintf(err, errlen, "unsafe file path %s", rel);
		return -1;
	}
	if (snprintf(path, sizeof(path), "%s/%s", base, rel) >= (int)sizeof(path)) {
		(void)snprintf(err, errlen, "file path too long");
		return -1;
	}
	for (char *p = path + strlen(base) + 1; (p = strchr(p, '/')); p++) {
		*p = '\0';
		if (mkdir(path, 0755) < 0 && errno != EEXIST) {
			(void)snprintf(err, errlen, "mkdir %s: %s", rel, strerror(errno));
			return -1;
		}
		(void)!chown(path, uid, uid);
		*p = '/';
	}
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
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

int workspace_create(struct run *r, char *err, size_t errlen)
{
	char ws[600], opts[128];
	uid_t owner = r->host_base + r->uid;
	struct json_object *files = NULL;

	(void)snprintf(ws, sizeof(ws), "%s/workspace", r->dir);
	if (mkdir(ws, 0700) < 0 && errno != EEXIST) {
		(void)snprintf(err, errlen, "mkdir workspace: %s", strerror(errno));
		return -1;
	}
	(void)snprintf(opts, sizeof(opts), "size=%lldm,mode=0700,uid=%u,gid=%u",
		       (long long)cfg_int(CFG_WORKSPACE_CAP_MB), (unsigned)owner,
		       (unsigned)owner);
	if (mount("sandbox-ws", ws, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, opts) < 0) {
		(void)snprintf(err, errlen, "mount workspace: %s", strerror(errno));
		return -1;
	}
	json_object_object_get_ex(r->row, "files", &files);
	for (size_t i = 0; files && i < json_object_array_length(files); i++) {
		struct json_object *f = json_object_array_get_idx(files, i), *p, *c;
		if (!json_object_object_get_ex(f, "path", &p) ||
		    !json_object_object_get_ex(f, "content_b64", &c)) {
			(void)snprintf(err, errlen, "files[%zu] malformed", i);
			return -1;
		}
		size_t len = 0;
		unsigned char *data = b64decode(json_object_get_string(c), &len);
		if (!data) {
			(void)snprintf(err, errlen, "files[%zu]: bad base64", i);
			return -1;
		}
		int rc = write_file(ws, json_object_get_string(p), data, len, owner,
				    err, errlen);
		free(data);
		if (rc < 0)
			return -1;
	}
	return 0;
}

void workspace_destroy(struct run *r)
{
	char ws[600];

	(void)snprintf(ws, sizeof(ws), "%s/workspace", r->dir);
	if (umount2(ws, MNT_DETACH) < 0 && errno != EINVAL && errno != ENOENT)
		log_warn("umount %s: %s", ws, strerror(errno));
	(void)rmdir(ws);
}

/* After a crash: unmount every workspace tmpfs below DATA_ROOT/runs. */
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
		if (umount2(mnt, MNT_DETACH) == 0)
			log_msg(LOG_LVL_INFO, log_fields("mount", mnt, NULL),
				"recovery: unmounted leftover workspace");
	}
	fclose(f);
}
