/* runtime_docker.c: the `docker` runtime, through the Docker Engine API
 * on its unix socket (SANDBOX_DOCKER_HOST) with libcurl; no CLI.
 *
 * A run is driven by a child process of the supervisor (the driver), the
 * counterpart of `crun run` for oci: it creates the container (the same
 * hardening as oci, expressed in HostConfig), attaches to its stdio
 * (hijacked stream, demultiplexed into the run's stdout/stderr pipes,
 * stdin relayed for interactive runs), starts it, reports "started" on the
 * status pipe, and when the stream ends waits for the exit code, adds
 * oom=1 when the kernel killed it, passes on sandbox-init's verdict (a file
 * mounted at /.sandbox-status: there is no fd 3 across dockerd) and exits.
 * SIGTERM to the driver becomes a TERM to the container (cancel); SIGUSR2 a
 * KILL. Deletion is another short child (DELETE ?force=1).
 *
 * The container runs as the run's random uid from the start (sandbox-init
 * in its rootless mode applies rlimits, reaps zombies and reports), with
 * every capability dropped, no_new_privs, our seccomp profile, no network,
 * a read-only root, tmpfs /tmp and the run's (or session's) workspace.
 * Its cgroup lives below /sandbox/sbx-<id>, a parent the supervisor reads
 * the usage of after the container is gone (hierarchical accounting). */
#include "supervisor.h"
#include "../lib/config.h"
#include "../lib/log.h"
#include "../lib/util.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define DOCKER_API "http://docker/v1.41"

struct buf {
	char *p;
	size_t n;
};

static size_t collect(char *data, size_t sz, size_t nm, void *ctx)
{
	struct buf *b = ctx;
	size_t len = sz * nm;
	char *np = realloc(b->p, b->n + len + 1);
	if (!np)
		return 0;
	b->p = np;
	memcpy(b->p + b->n, data, len);
	b->n += len;
	b->p[b->n] = '\0';
	return len;
}

/* One request; the answer body in *out (caller frees). HTTP status, or -1
 * when dockerd cannot be reached. */
static long request(const char *method, const char *path, const char *json,
		    const char *upload_file, long timeout_ms, char **out)
{
	CURL *c = curl_easy_init();
	struct buf b = { NULL, 0 };
	char url[1024];
	long code = -1;
	struct curl_slist *h = NULL;
	FILE *up = NULL;

	if (!c)
		return -1;
	(void)snprintf(url, sizeof(url), DOCKER_API "%s", path);
	curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, cfg_str(CFG_DOCKER_HOST));
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	if (json) {
		h = curl_slist_append(h, "Content-Type: application/json");
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, json);
	} else if (upload_file) {
		struct stat st;
		up = fopen(upload_file, "rbe");
		if (!up || fstat(fileno(up), &st) < 0)
			goto out;
		h = curl_slist_append(h, "Content-Type: application/x-tar");
		curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(c, CURLOPT_READDATA, up);
		curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, (curl_off_t)st.st_size);
		curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, "POST");
	} else if (strcmp(method, "POST") == 0) {
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, "");
	}
	h = curl_slist_append(h, "Expect:");
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	if (curl_easy_perform(c) == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
out:
	if (up)
		fclose(up);
	curl_slist_free_all(h);
	curl_easy_cleanup(c);
	if (out)
		*out = b.p ? b.p : xstrdup("");
	else
		free(b.p);
	return code;
}

/* ---- probe and images ---- */

int docker_version(char *out, size_t outlen, char *err, size_t errlen)
{
	char *body = NULL;
	long code = request("GET", "/version", NULL, NULL, 3000, &body);
	struct json_object *o = code == 200 ? json_tokener_parse(body) : NULL, *v = NULL;

	free(body);
	if (!o || !json_object_object_get_ex(o, "Version", &v)) {
		(void)snprintf(err, errlen, code < 0 ? "dockerd at %s does not answer"
						     : "dockerd at %s answered %ld to /version",
			       cfg_str(CFG_DOCKER_HOST), code);
		json_object_put(o);
		return -1;
	}
	(void)snprintf(out, outlen, "docker %s", json_object_get_string(v));
	json_object_put(o);
	return 0;
}

/* The docker image for catalog image `name` whose tarball has `digest`
 * (sha256:...): imported once, tagged sandbox/<name>:<12 hex of digest>.
 * Its docker id into id_out. 0, or -1. */
int docker_image(const char *name, const char *digest, const char *tarball, char *id_out,
		 size_t idlen)
{
	char path[512], ref[160], *body = NULL;
	const char *hex = strncmp(digest, "sha256:", 7) == 0 ? digest + 7 : digest;

	(void)snprintf(ref, sizeof(ref), "sandbox/%s:%.12s", name, hex);
	(void)snprintf(path, sizeof(path), "/images/%s/json", ref);
	long code = request("GET", path, NULL, NULL, 10000, &body);
	if (code == 404 && tarball) {
		free(body);
		body = NULL;
		(void)snprintf(path, sizeof(path), "/images/create?fromSrc=-&repo=sandbox/%s&tag=%.12s",
			       name, hex);
		code = request("POST", path, NULL, tarball, 600000, &body);
		log_msg(code == 200 ? LOG_LVL_INFO : LOG_LVL_ERROR, log_fields("image", ref, NULL),
			"docker: imported %s (%ld)", tarball, code);
		free(body);
		body = NULL;
		(void)snprintf(path, sizeof(path), "/images/%s/json", ref);
		code = request("GET", path, NULL, NULL, 10000, &body);
	}
	struct json_object *o = code == 200 ? json_tokener_parse(body) : NULL, *id = NULL;
	free(body);
	int rc = -1;
	if (o && json_object_object_get_ex(o, "Id", &id)) {
		(void)strlcpy_ok(id_out, json_object_get_string(id), idlen);
		rc = 0;
	}
	json_object_put(o);
	return rc;
}

/* ---- the container ---- */

static struct json_object *jstr(const char *s)
{
	return json_object_new_string(s);
}

static struct json_object *create_body(struct run *r, const char *image_ref,
				       const char *status_file)
{
	struct json_object *c = json_object_new_object(), *hc = json_object_new_object();
	struct json_object *entry = json_object_new_array(), *cmd = json_object_new_array();
	struct json_object *env = sandbox_env(r), *labels = json_object_new_object();
	struct json_object *tmpfs = json_object_new_object(), *binds = json_object_new_array();
	struct json_object *ulimits = json_object_new_array(), *secopt = json_object_new_array();
	struct json_object *capdrop = json_object_new_array();
	char user[48], tmpopt[128], bind[1200];

	(void)snprintf(user, sizeof(user), "%u:%u", (unsigned)r->uid, (unsigned)r->uid);
	json_object_array_add(entry, jstr("/.sandbox-init"));
	sandbox_init_args(cmd, r, true);
	json_object_object_add(labels, "sandbox.managed", jstr("true"));
	json_object_object_add(labels, "sandbox.run_id", jstr(r->id));
	json_object_object_add(labels, "sandbox.session_id", jstr(r->session_id));
	json_object_object_add(labels, "sandbox.node_id", jstr(sup->node_id));
	json_object_object_add(labels, "sandbox.user_id", jstr(r->user_id));

	json_object_object_add(c, "Image", jstr(image_ref));
	json_object_object_add(c, "Entrypoint", entry);
	json_object_object_add(c, "Cmd", cmd);
	json_object_object_add(c, "Env", env);
	json_object_object_add(c, "User", jstr(user));
	json_object_object_add(c, "WorkingDir", jstr("/workspace"));
	json_object_object_add(c, "Hostname", jstr("sandbox"));
	json_object_object_add(c, "NetworkDisabled", json_object_new_boolean(1));
	json_object_object_add(c, "Labels", labels);
	json_object_object_add(c, "AttachStdout", json_object_new_boolean(1));
	json_object_object_add(c, "AttachStderr", json_object_new_boolean(1));
	if (r->interactive) {
		json_object_object_add(c, "AttachStdin", json_object_new_boolean(1));
		json_object_object_add(c, "OpenStdin", json_object_new_boolean(1));
		json_object_object_add(c, "StdinOnce", json_object_new_boolean(1));
	}

	json_object_object_add(hc, "NetworkMode", jstr("none"));
	json_object_object_add(hc, "ReadonlyRootfs", json_object_new_boolean(1));
	json_object_array_add(capdrop, jstr("ALL"));
	json_object_object_add(hc, "CapDrop", capdrop);
	json_object_array_add(secopt, jstr("no-new-privileges"));
	struct json_object *prof = seccomp_profile();
	char *seccomp = NULL;
	const char *pj = json_object_to_json_string_ext(prof, JSON_C_TO_STRING_PLAIN);
	size_t sl = strlen(pj) + 16;
	seccomp = xcalloc(1, sl);
	(void)snprintf(seccomp, sl, "seccomp=%s", pj);
	json_object_array_add(secopt, jstr(seccomp));
	free(seccomp);
	json_object_put(prof);
	json_object_object_add(hc, "SecurityOpt", secopt);
	(void)snprintf(tmpopt, sizeof(tmpopt), "rw,noexec,nosuid,nodev,mode=1777,size=%lldm",
		       (long long)cfg_int(CFG_WORKSPACE_CAP_MB));
	json_object_object_add(tmpfs, "/tmp", jstr(tmpopt));
	json_object_object_add(tmpfs, "/dev/shm", jstr("rw,noexec,nosuid,nodev,size=64m"));
	json_object_object_add(hc, "Tmpfs", tmpfs);
	/* The workspace is our own tmpfs (noexec,nosuid,nodev, size cap): the
	 * bind keeps its flags. */
	(void)snprintf(bind, sizeof(bind), "%s:/workspace:rw", r->ws);
	json_object_array_add(binds, jstr(bind));
	(void)snprintf(bind, sizeof(bind), "%s:/.sandbox-init:ro", cfg_str(CFG_INIT_PATH));
	json_object_array_add(binds, jstr(bind));
	(void)snprintf(bind, sizeof(bind), "%s:/.sandbox-status:rw", status_file);
	json_object_array_add(binds, jstr(bind));
	json_object_object_add(hc, "Binds", binds);
	json_object_object_add(hc, "PidsLimit", json_object_new_int64(r->pids));
	json_object_object_add(hc, "Memory", json_object_new_int64((int64_t)r->memory_mb << 20));
	json_object_object_add(hc, "MemorySwap", json_object_new_int64((int64_t)r->memory_mb << 20));
	json_object_object_add(hc, "NanoCpus", json_object_new_int64((int64_t)(r->cpu * 1e9)));
	json_object_object_add(hc, "OomScoreAdj", json_object_new_int(1000));
	char parent[80];
	(void)snprintf(parent, sizeof(parent), "/sandbox/%s", r->cid);
	json_object_object_add(hc, "CgroupParent", jstr(parent));
	static const char *const lims[] = { "nofile", "nproc", "core" };
	long long vals[] = { r->nofile, r->nproc, 0 };
	for (size_t i = 0; i < 3; i++) {
		struct json_object *u = json_object_new_object();
		json_object_object_add(u, "Name", jstr(lims[i]));
		json_object_object_add(u, "Soft", json_object_new_int64(vals[i]));
		json_object_object_add(u, "Hard", json_object_new_int64(vals[i]));
		json_object_array_add(ulimits, u);
	}
	json_object_object_add(hc, "Ulimits", ulimits);
	json_object_object_add(c, "HostConfig", hc);
	return c;
}

/* The driver's signals, read by its loop. */
static volatile sig_atomic_t pending_sig;
static void on_signal(int sig)
{
	pending_sig = sig;
}

static void container_kill(const char *cid, const char *sig)
{
	char path[160];
	(void)snprintf(path, sizeof(path), "/containers/%s/kill?signal=%s", cid, sig);
	(void)request("POST", path, NULL, NULL, 5000, NULL);
}

static bool write_all(int fd, const unsigned char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return false;
		p += w;
		n -= (size_t)w;
	}
	return true;
}

/* Attach (hijacked HTTP) before start, so no output is missed. */
static CURL *attach(const char *cid, bool with_stdin, curl_socket_t *sock)
{
	CURL *c = curl_easy_init();
	char req[512];
	size_t sent = 0;

	curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, cfg_str(CFG_DOCKER_HOST));
	curl_easy_setopt(c, CURLOPT_URL, "http://docker/");
	curl_easy_setopt(c, CURLOPT_CONNECT_ONLY, 1L);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	if (curl_easy_perform(c) != CURLE_OK ||
	    curl_easy_getinfo(c, CURLINFO_ACTIVESOCKET, sock) != CURLE_OK) {
		curl_easy_cleanup(c);
		return NULL;
	}
	int n = snprintf(req, sizeof(req),
			 "POST /v1.41/containers/%s/attach?stream=1&stdout=1&stderr=1%s HTTP/1.1\r\n"
			 "Host: docker\r\nUpgrade: tcp\r\nConnection: Upgrade\r\n"
			 "Content-Length: 0\r\n\r\n",
			 cid, with_stdin ? "&stdin=1" : "");
	while (sent < (size_t)n) {
		size_t w = 0;
		CURLcode rc = curl_easy_send(c, req + sent, (size_t)n - sent, &w);
		if (rc == CURLE_AGAIN) {
			struct pollfd p = { .fd = *sock, .events = POLLOUT };
			(void)poll(&p, 1, 1000);
			continue;
		}
		if (rc != CURLE_OK) {
			curl_easy_cleanup(c);
			return NULL;
		}
		sent += w;
	}
	/* The response head, byte by byte up to the blank line. */
	char head[2048];
	size_t hl = 0;
	int64_t deadline = now_mono_ms() + 10000;
	while (hl + 1 < sizeof(head) && now_mono_ms() < deadline) {
		size_t got = 0;
		CURLcode rc = curl_easy_recv(c, head + hl, 1, &got);
		if (rc == CURLE_AGAIN) {
			struct pollfd p = { .fd = *sock, .events = POLLIN };
			(void)poll(&p, 1, 1000);
			continue;
		}
		if (rc != CURLE_OK || got == 0)
			break;
		hl++;
		head[hl] = '\0';
		if (hl >= 4 && memcmp(head + hl - 4, "\r\n\r\n", 4) == 0) {
			if (strncmp(head, "HTTP/1.1 101", 12) == 0 || strncmp(head, "HTTP/1.1 200", 12) == 0)
				return c;
			break;
		}
	}
	curl_easy_cleanup(c);
	return NULL;
}

/* stdout/stderr frames: 8-byte header (stream, 0, 0, 0, size BE32). */
struct demux {
	unsigned char hdr[8];
	size_t hdr_n;
	uint32_t left;
	int fd;
};

static void demux_feed(struct demux *d, const unsigned char *p, size_t n, int out, int err)
{
	while (n > 0) {
		if (d->left == 0) {
			size_t take = 8 - d->hdr_n < n ? 8 - d->hdr_n : n;
			memcpy(d->hdr + d->hdr_n, p, take);
			d->hdr_n += take;
			p += take;
			n -= take;
			if (d->hdr_n < 8)
				return;
			d->hdr_n = 0;
			d->left = (uint32_t)d->hdr[4] << 24 | (uint32_t)d->hdr[5] << 16 |
				  (uint32_t)d->hdr[6] << 8 | d->hdr[7];
			d->fd = d->hdr[0] == 2 ? err : out;
			continue;
		}
		size_t take = d->left < n ? d->left : n;
		(void)write_all(d->fd, p, take);
		d->left -= (uint32_t)take;
		p += take;
		n -= take;
	}
}

static int drive(struct run *r, int in, int out, int err, int status)
{
	char path[700], ref[200], *body = NULL, status_file[700];
	const char *image_id = NULL;
	struct json_object *row_img = NULL;

	(void)snprintf(status_file, sizeof(status_file), "%s/status", r->dir);
	if (json_object_object_get_ex(r->row, "__docker_image", &row_img))
		image_id = json_object_get_string(row_img);
	(void)strlcpy_ok(ref, image_id ? image_id : "", sizeof(ref));
	struct json_object *cb = create_body(r, ref, status_file);
	(void)snprintf(path, sizeof(path), "/containers/create?name=%s", r->cid);
	const char *json = json_object_to_json_string_ext(cb, JSON_C_TO_STRING_PLAIN);
	long code = request("POST", path, json, NULL, 30000, &body);
	if (code == 409) { /* a leftover of the same run: replace it */
		free(body);
		(void)snprintf(path, sizeof(path), "/containers/%s?force=1", r->cid);
		(void)request("DELETE", path, NULL, NULL, 30000, NULL);
		(void)snprintf(path, sizeof(path), "/containers/create?name=%s", r->cid);
		code = request("POST", path, json, NULL, 30000, &body);
	}
	json_object_put(cb);
	if (code != 201) {
		dprintf(err, "sandbox: docker create failed (%ld): %.300s\n", code, body);
		dprintf(status, "status=provision_failed\nmessage=docker create: %ld %.200s\n", code,
			body);
		free(body);
		return 125;
	}
	free(body);
	curl_socket_t sock;
	CURL *att = attach(r->cid, r->interactive, &sock);
	if (!att) {
		dprintf(status, "status=provision_failed\nmessage=docker attach failed\n");
		return 125;
	}
	(void)snprintf(path, sizeof(path), "/containers/%s/start", r->cid);
	code = request("POST", path, NULL, NULL, 60000, &body);
	if (code != 204 && code != 304) {
		dprintf(status, "status=provision_failed\nmessage=docker start: %ld %.200s\n", code,
			body ? body : "");
		free(body);
		curl_easy_cleanup(att);
		return 125;
	}
	free(body);
	dprintf(status, "started=1\n");

	struct demux dm = { .left = 0 };
	unsigned char buf[65536];
	bool stdin_open = r->interactive && in >= 0;
	for (;;) {
		if (pending_sig) {
			int sg = pending_sig;
			pending_sig = 0;
			container_kill(r->cid, sg == SIGUSR2 ? "KILL" : "TERM");
		}
		struct pollfd p[2] = { { .fd = sock, .events = POLLIN },
				       { .fd = stdin_open ? in : -1, .events = POLLIN } };
		if (poll(p, 2, 200) < 0 && errno != EINTR)
			break;
		if (p[1].revents) {
			ssize_t n = read(in, buf, sizeof(buf));
			if (n > 0) {
				size_t off = 0;
				while (off < (size_t)n) {
					size_t w = 0;
					CURLcode rc = curl_easy_send(att, buf + off, (size_t)n - off, &w);
					if (rc == CURLE_AGAIN)
						continue;
					if (rc != CURLE_OK)
						break;
					off += w;
				}
			} else if (n == 0 || errno != EINTR) {
				stdin_open = false;
				(void)shutdown(sock, SHUT_WR); /* the container's stdin ends */
			}
		}
		if (p[0].revents) {
			size_t got = 0;
			CURLcode rc = curl_easy_recv(att, buf, sizeof(buf), &got);
			if (rc == CURLE_AGAIN)
				continue;
			if (rc != CURLE_OK || got == 0)
				break; /* the container's stdio closed */
			demux_feed(&dm, buf, got, out, err);
		}
	}
	curl_easy_cleanup(att);
	close(out);
	close(err);

	/* The exit code from dockerd; the rest of the verdict from init. */
	(void)snprintf(path, sizeof(path), "/containers/%s/wait", r->cid);
	int exit_code = -1;
	for (int attempt = 0; attempt < 3 && exit_code < 0; attempt++) {
		if (pending_sig) {
			container_kill(r->cid, "KILL");
			pending_sig = 0;
		}
		code = request("POST", path, NULL, NULL, 600000, &body);
		struct json_object *o = code == 200 ? json_tokener_parse(body) : NULL, *sc = NULL;
		if (o && json_object_object_get_ex(o, "StatusCode", &sc))
			exit_code = json_object_get_int(sc);
		json_object_put(o);
		free(body);
		body = NULL;
		if (code < 0)
			break; /* dockerd is gone */
	}
	if (exit_code < 0) {
		dprintf(status, "status=provision_failed\nmessage=dockerd stopped answering "
				"while the run was in flight\nreason=runtime_lost\n");
		return 125;
	}
	(void)snprintf(path, sizeof(path), "/containers/%s/json", r->cid);
	code = request("GET", path, NULL, NULL, 10000, &body);
	struct json_object *o = code == 200 ? json_tokener_parse(body) : NULL, *st = NULL, *oom = NULL;
	if (o && json_object_object_get_ex(o, "State", &st) &&
	    json_object_object_get_ex(st, "OOMKilled", &oom) && json_object_get_boolean(oom))
		dprintf(status, "oom=1\n");
	json_object_put(o);
	free(body);
	int sf = open(status_file, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (sf >= 0) {
		ssize_t n;
		while ((n = read(sf, buf, sizeof(buf))) > 0)
			(void)write_all(status, buf, (size_t)n);
		close(sf);
	}
	/* The exit code dockerd saw is the one that counts. */
	dprintf(status, "exitcode=%d\n", exit_code);
	return exit_code & 0xff;
}

/* Image ids known to be in dockerd, so a run costs no lookup; emptied by
 * every probe (which re-imports what dockerd lost). */
static struct {
	char name[65], digest[80], id[80];
} known_images[16];

void docker_images_forget(void)
{
	memset(known_images, 0, sizeof(known_images));
}

static bool image_known(const char *name, const char *digest, char *id, size_t idlen)
{
	for (size_t i = 0; i < ARRAY_SIZE(known_images); i++)
		if (strcmp(known_images[i].name, name) == 0 &&
		    strcmp(known_images[i].digest, digest) == 0)
			return strlcpy_ok(id, known_images[i].id, idlen);
	return false;
}

static void image_remember(const char *name, const char *digest, const char *id)
{
	for (size_t i = 0; i < ARRAY_SIZE(known_images); i++) {
		if (known_images[i].name[0] && strcmp(known_images[i].name, name) != 0)
			continue;
		(void)strlcpy_ok(known_images[i].name, name, sizeof(known_images[i].name));
		(void)strlcpy_ok(known_images[i].digest, digest, sizeof(known_images[i].digest));
		(void)strlcpy_ok(known_images[i].id, id, sizeof(known_images[i].id));
		return;
	}
}

/* Before the driver starts: the status file sandbox-init writes (the
 * run's uid owns it), and the image's id in dockerd. */
int docker_prepare(struct run *r, char *err, size_t errlen)
{
	char path[700], tarball[600];
	struct json_object *dg = NULL;

	(void)snprintf(path, sizeof(path), "%s/status", r->dir);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0 || fchown(fd, r->uid, r->uid) < 0) {
		(void)snprintf(err, errlen, "status file: %s", strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	close(fd);
	json_object_object_get_ex(r->row, "image_digest", &dg);
	const char *digest = dg ? json_object_get_string(dg) : "";
	(void)snprintf(tarball, sizeof(tarball), "%s/%s.tar", cfg_str(CFG_IMAGES_DIR), r->image);
	if (!image_known(r->image, digest, r->docker_image, sizeof(r->docker_image))) {
		if (docker_image(r->image, digest, tarball, r->docker_image,
				 sizeof(r->docker_image)) < 0) {
			(void)snprintf(err, errlen, "image %s is not available in dockerd", r->image);
			return -1;
		}
		image_remember(r->image, digest, r->docker_image);
	}
	json_object_object_add(r->row, "__docker_image", json_object_new_string(r->docker_image));
	return 0;
}

pid_t docker_spawn(struct run *r, const char *verb, int in_fd, int out_fd, int err_fd,
		   int status_fd)
{
	pid_t pid = fork();

	if (pid != 0)
		return pid;
	/* The driver does not outlive the supervisor: after a crash the
	 * restarted supervisor reconciles the container itself. */
	(void)prctl(PR_SET_PDEATHSIG, SIGKILL);
	/* Only this run's descriptors: another run's pipes held open here
	 * would keep its end-of-file from arriving. */
	int fds[4] = { in_fd, out_fd, err_fd, status_fd };
	for (int i = 0; i < 4; i++)
		if (fds[i] >= 0)
			fds[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, 1000 + i);
	(void)close_range(3, 999, 0);
	(void)close_range(1004, ~0U, 0);
	in_fd = fds[0];
	out_fd = fds[1];
	err_fd = fds[2];
	status_fd = fds[3];
	/* The child: the event loop's descriptors are not ours to use. */
	struct sigaction sa = { .sa_handler = on_signal };
	sigemptyset(&sa.sa_mask);
	(void)sigaction(SIGTERM, &sa, NULL);
	(void)sigaction(SIGUSR2, &sa, NULL);
	sigset_t none;
	sigemptyset(&none);
	(void)sigprocmask(SIG_SETMASK, &none, NULL);
	if (strcmp(verb, "delete") == 0) {
		char path[160];
		(void)snprintf(path, sizeof(path), "/containers/%s?force=1&v=1", r->cid);
		long code = request("DELETE", path, NULL, NULL, 60000, NULL);
		_exit(code == 204 || code == 404 ? 0 : 1);
	}
	_exit(drive(r, in_fd, out_fd, err_fd, status_fd));
}

/* Containers with our labels of this node that no run here accounts for
 * (after a crash, or a dockerd restart mid-run): removed. */
void docker_reconcile(struct supervisor *s)
{
	char path[1024], filter[256], esc[512], *body = NULL;

	(void)snprintf(filter, sizeof(filter), "{\"label\":[\"sandbox.node_id=%s\"]}", s->node_id);
	char *e = curl_easy_escape(NULL, filter, 0);
	(void)strlcpy_ok(esc, e ? e : "", sizeof(esc));
	curl_free(e);
	(void)snprintf(path, sizeof(path), "/containers/json?all=1&filters=%s", esc);
	long code = request("GET", path, NULL, NULL, 10000, &body);
	struct json_object *arr = code == 200 ? json_tokener_parse(body) : NULL;
	free(body);
	for (size_t i = 0; arr && i < json_object_array_length(arr); i++) {
		struct json_object *c = json_object_array_get_idx(arr, i), *names, *n0;
		if (!json_object_object_get_ex(c, "Names", &names) ||
		    !(n0 = json_object_array_get_idx(names, 0)))
			continue;
		const char *name = json_object_get_string(n0);
		if (*name == '/')
			name++;
		if (strncmp(name, "sbx-", 4) != 0 || strlen(name) != 40 || run_local(name + 4))
			continue;
		(void)snprintf(path, sizeof(path), "/containers/%s?force=1&v=1", name);
		code = request("DELETE", path, NULL, NULL, 30000, NULL);
		log_msg(LOG_LVL_INFO, log_fields("container", name, NULL),
			"docker: removed an orphaned container (%ld)", code);
	}
	json_object_put(arr);
}
