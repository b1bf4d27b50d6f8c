/* probe.c: find out, by trying, which runtimes work on this host. The
 * result goes into the node's heartbeat; /runtimes and /readyz read it.
 *
 * oci: a container is really started with the configured OCI runtime
 * (crun by default): an empty read-only root with sandbox-init
 * bind-mounted, in fresh pid/net/ipc/uts/mount namespaces, as nobody.
 * Only if it prints its greeting is oci "available".
 * docker: GET /version on the Engine API socket.
 * firecracker: not part of this release; says why. */
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
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

/* Run argv, capture up to outlen-1 bytes of stdout+stderr, kill it after
 * timeout_ms. Returns the exit status (0..255), or -1. */
int run_capture(char *const argv[], int timeout_ms, char *out,
		       size_t outlen)
{
	int p[2];
	size_t used = 0;
	pid_t pid;
	int status = 0;
	int64_t deadline = now_mono_ms() + timeout_ms;

	out[0] = '\0';
	if (pipe2(p, O_CLOEXEC) < 0)
		return -1;
	pid = fork();
	if (pid < 0) {
		close(p[0]);
		close(p[1]);
		return -1;
	}
	if (pid == 0) {
		int devnull = open("/dev/null", O_RDONLY);
		(void)dup2(devnull, 0);
		(void)dup2(p[1], 1);
		(void)dup2(p[1], 2);
		execvp(argv[0], argv);
		_exit(127);
	}
	close(p[1]);
	for (;;) {
		int64_t left = deadline - now_mono_ms();
		if (left <= 0) {
			(void)kill(pid, SIGKILL);
			break;
		}
		struct pollfd pfd = { .fd = p[0], .events = POLLIN };
		if (poll(&pfd, 1, (int)left) <= 0)
			continue;
		char buf[512];
		ssize_t n = read(p[0], buf, sizeof(buf));
		if (n <= 0)
			break;
		size_t take = (size_t)n;
		if (used + take >= outlen)
			take = outlen - 1 - used;
		memcpy(out + used, buf, take);
		used += take;
		out[used] = '\0';
	}
	close(p[0]);
	if (waitpid(pid, &status, 0) < 0)
		return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static int write_file(const char *path, const char *data)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -1;
	size_t n = strlen(data);
	ssize_t w = write(fd, data, n);
	close(fd);
	return w == (ssize_t)n ? 0 : -1;
}

static struct json_object *jstrs(const char *const *v)
{
	struct json_object *a = json_object_new_array();
	for (; *v; v++)
		json_object_array_add(a, json_object_new_string(*v));
	return a;
}

static struct json_object *probe_config(const char *init)
{
	struct json_object *c = json_object_new_object();
	struct json_object *proc = json_object_new_object();
	struct json_object *user = json_object_new_object();
	struct json_object *root = json_object_new_object();
	struct json_object *linux_ = json_object_new_object();
	struct json_object *ns = json_object_new_array();
	struct json_object *mounts = json_object_new_array();
	static const char *const args[] = { "/.sandbox-init", "--probe", NULL };
	static const char *const env[] = { "PATH=/usr/bin:/bin", NULL };
	static const char *const nstypes[] = { "pid", "network", "ipc", "uts",
					       "mount", NULL };

	json_object_object_add(c, "ociVersion", json_object_new_string("1.0.2"));
	json_object_object_add(proc, "terminal", json_object_new_boolean(0));
	json_object_object_add(user, "uid", json_object_new_int(65534));
	json_object_object_add(user, "gid", json_object_new_int(65534));
	json_object_object_add(proc, "user", user);
	json_object_object_add(proc, "args", jstrs(args));
	json_object_object_add(proc, "env", jstrs(env));
	json_object_object_add(proc, "cwd", json_object_new_string("/"));
	json_object_object_add(proc, "noNewPrivileges", json_object_new_boolean(1));
	json_object_object_add(c, "process", proc);
	json_object_object_add(root, "path", json_object_new_string("rootfs"));
	json_object_object_add(root, "readonly", json_object_new_boolean(1));
	json_object_object_add(c, "root", root);
	json_object_object_add(c, "hostname", json_object_new_string("probe"));

	struct json_object *m = json_object_new_object();
	json_object_object_add(m, "destination", json_object_new_string("/proc"));
	json_object_object_add(m, "type", json_object_new_string("proc"));
	json_object_object_add(m, "source", json_object_new_string("proc"));
	json_object_array_add(mounts, m);
	static const char *const bindopts[] = { "bind", "ro", "nosuid", "nodev", NULL };
	m = json_object_new_object();
	json_object_object_add(m, "destination",
			       json_object_new_string("/.sandbox-init"));
	json_object_object_add(m, "type", json_object_new_string("bind"));
	json_object_object_add(m, "source", json_object_new_string(init));
	json_object_object_add(m, "options", jstrs(bindopts));
	json_object_array_add(mounts, m);
	json_object_object_add(c, "mounts", mounts);

	for (const char *const *t = nstypes; *t; t++) {
		struct json_object *n = json_object_new_object();
		json_object_object_add(n, "type", json_object_new_string(*t));
		json_object_array_add(ns, n);
	}
	json_object_object_add(linux_, "namespaces", ns);
	json_object_object_add(c, "linux", linux_);
	return c;
}

static struct json_object *result(bool ok, const char *version,
				  const char *notes)
{
	struct json_object *o = json_object_new_object();

	json_object_object_add(o, "available", json_object_new_boolean(ok));
	json_object_object_add(o, "version",
			       version ? json_object_new_string(version) : NULL);
	json_object_object_add(o, "notes",
			       notes ? json_object_new_string(notes) : NULL);
	return o;
}

static struct json_object *probe_oci(void)
{
	const char *rt = cfg_str(CFG_OCI_RUNTIME);
	const char *init = cfg_str(CFG_INIT_PATH);
	char dir[512], path[600], state[600], out[1024], version[128] = "";
	char name[64], notes[1200];

	char *vargv[] = { (char *)rt, "--version", NULL };
	if (run_capture(vargv, 5000, out, sizeof(out)) != 0) {
		(void)snprintf(notes, sizeof(notes),
			       "OCI runtime '%s' cannot be executed", rt);
		return result(false, NULL, notes);
	}
	(void)sscanf(out, "%127[^\n]", version);
	if (access(init, R_OK | X_OK) != 0) {
		(void)snprintf(notes, sizeof(notes), "sandbox-init missing at %s",
			       init);
		return result(false, version, notes);
	}

	(void)snprintf(dir, sizeof(dir), "%s/probe", cfg_str(CFG_DATA_ROOT));
	(void)snprintf(state, sizeof(state), "%s/oci-state", cfg_str(CFG_DATA_ROOT));
	(void)mkdir(cfg_str(CFG_DATA_ROOT), 0711);
	(void)mkdir(dir, 0700);
	(void)mkdir(state, 0700);
	(void)snprintf(path, sizeof(path), "%s/rootfs", dir);
	(void)mkdir(path, 0755);
	(void)snprintf(path, sizeof(path), "%s/rootfs/proc", dir);
	(void)mkdir(path, 0555);
	(void)snprintf(path, sizeof(path), "%s/rootfs/dev", dir);
	(void)mkdir(path, 0555);
	(void)snprintf(path, sizeof(path), "%s/rootfs/.sandbox-init", dir);
	(void)write_file(path, "");
	struct json_object *cfg = probe_config(init);
	(void)snprintf(path, sizeof(path), "%s/config.json", dir);
	int w = write_file(path, json_object_to_json_string_ext(
					 cfg, JSON_C_TO_STRING_PLAIN));
	json_object_put(cfg);
	if (w < 0) {
		(void)snprintf(notes, sizeof(notes), "cannot write %s: %s", path,
			       strerror(errno));
		return result(false, version, notes);
	}
	(void)snprintf(name, sizeof(name), "sandbox-probe-%d", (int)getpid());
	char *argv[] = { (char *)rt, "--root", state, "run", "--bundle", dir,
			 name, NULL, NULL };
	if (oci_is_runsc()) {
		/* runsc: global flags before the verb. */
		char *rs[] = { (char *)rt, "--root", state, "--network=none", "run",
			       "--bundle", dir, name, NULL };
		memcpy(argv, rs, sizeof(rs));
	}
	int rc = run_capture(argv, 10000, out, sizeof(out));
	if (rc == 0 && strstr(out, "sandbox-init probe ok"))
		return result(true, version, NULL);
	/* Leave nothing behind if the container got stuck half-way. */
	char *dargv[] = { (char *)rt, "--root", state, "delete", "--force", name,
			  NULL };
	char ignored[256];
	(void)run_capture(dargv, 5000, ignored, sizeof(ignored));
	strtrim(out);
	(void)snprintf(notes, sizeof(notes), "probe container failed (exit %d): %s",
		       rc, out);
	return result(false, version, notes);
}

static struct json_object *probe_docker(void)
{
	const char *sock = cfg_str(CFG_DOCKER_HOST);
	char notes[600], version[128];

	if (access(sock, F_OK) != 0) {
		(void)snprintf(notes, sizeof(notes), "no dockerd socket at %s", sock);
		return result(false, NULL, notes);
	}
	if (docker_version(version, sizeof(version), notes, sizeof(notes)) < 0)
		return result(false, NULL, notes);
	return result(true, version, NULL);
}

static struct json_object *probe_firecracker(void)
{
	return result(false, NULL,
		      access("/dev/kvm", R_OK | W_OK) == 0
			      ? "microVM runtime is not part of this release"
			      : "no usable /dev/kvm; microVM runtime is not part "
				"of this release");
}

struct json_object *probe_runtimes(void)
{
	struct json_object *o = json_object_new_object();

	json_object_object_add(o, "oci", probe_oci());
	json_object_object_add(o, "docker", probe_docker());
	json_object_object_add(o, "firecracker", probe_firecracker());
	return o;
}
