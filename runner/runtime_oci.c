/* runtime_oci.c: the daemonless `oci` runtime. Writes an OCI bundle
 * (config.json) with every security default of the PRD and drives the OCI
 * runtime binary (SANDBOX_OCI_RUNTIME: crun, runc or runsc) with
 * `run --detach` and `delete`, each a child process of the supervisor so
 * the event loop never blocks on it.
 *
 * runsc (gVisor) differs in one way that matters: it cannot pass an extra
 * file descriptor into the sandbox (no --preserve-fds), so sandbox-init's
 * status channel is a FIFO in the bundle directory (root's, mode 0600),
 * bind-mounted at /.sandbox-status and opened by init as the sandbox's
 * root before it drops to the run's uid (runsc --host-fifo=open). The
 * supervisor holds the read end exactly as it holds the pipe for crun. */
#include "supervisor.h"
#include "../lib/config.h"
#include "../lib/log.h"
#include "../lib/util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

static struct json_object *jstr(const char *s) { return json_object_new_string(s); }

static struct json_object *strs(const char *const *v)
{
	struct json_object *a = json_object_new_array();
	for (; *v; v++)
		json_object_array_add(a, jstr(*v));
	return a;
}

static void add_mount(struct json_object *mounts, const char *dst,
		      const char *type, const char *src, const char *const *opts)
{
	struct json_object *m = json_object_new_object();
	json_object_object_add(m, "destination", jstr(dst));
	json_object_object_add(m, "type", jstr(type));
	json_object_object_add(m, "source", jstr(src));
	json_object_object_add(m, "options", strs(opts));
	json_object_array_add(mounts, m);
}

static struct json_object *id_map(uid_t host)
{
	struct json_object *a = json_object_new_array();
	struct json_object *m = json_object_new_object();
	json_object_object_add(m, "containerID", json_object_new_int(0));
	json_object_object_add(m, "hostID", json_object_new_int64(host));
	json_object_object_add(m, "size", json_object_new_int(65536));
	json_object_array_add(a, m);
	return a;
}

/* runsc's status FIFO: in the run's bundle directory. */
static void status_fifo_path(const struct run *r, char *out, size_t outlen)
{
	(void)snprintf(out, outlen, "%s/status", r->dir);
}

static struct json_object *build_config(struct run *r)
{
	char rootfs[600], ws[600], tmpsz[64];
	struct json_object *c = json_object_new_object();
	struct json_object *proc = json_object_new_object();
	struct json_object *user = json_object_new_object();
	struct json_object *args = json_object_new_array();
	struct json_object *caps = json_object_new_object();
	struct json_object *root = json_object_new_object();
	struct json_object *mounts = json_object_new_array();
	struct json_object *lx = json_object_new_object();
	struct json_object *res = json_object_new_object();
	struct json_object *mem = json_object_new_object();
	struct json_object *cpu = json_object_new_object();
	struct json_object *pids = json_object_new_object();
	struct json_object *ns = json_object_new_array();
	/* init keeps exactly what it needs: to drop to the run's uid and
	 * empty the bounding set (SETUID, SETGID, SETPCAP), and to forward
	 * SIGTERM to processes of that uid (KILL). The command gets none. */
	static const char *const initcaps[] = { "CAP_SETUID", "CAP_SETGID",
						"CAP_SETPCAP", "CAP_KILL", NULL };

	json_object_object_add(c, "ociVersion", jstr("1.0.2"));
	json_object_object_add(proc, "terminal", json_object_new_boolean(0));
	json_object_object_add(user, "uid", json_object_new_int(0));
	json_object_object_add(user, "gid", json_object_new_int(0));
	json_object_object_add(user, "additionalGids", json_object_new_array());
	json_object_object_add(proc, "user", user);

	json_object_array_add(args, jstr("/.sandbox-init"));
	sandbox_init_args(args, r, oci_is_runsc());
	json_object_object_add(proc, "args", args);
	json_object_object_add(proc, "env", sandbox_env(r));
	json_object_object_add(proc, "cwd", jstr("/"));
	json_object_object_add(caps, "bounding", strs(initcaps));
	json_object_object_add(caps, "effective", strs(initcaps));
	json_object_object_add(caps, "permitted", strs(initcaps));
	json_object_object_add(proc, "capabilities", caps);
	json_object_object_add(proc, "noNewPrivileges", json_object_new_boolean(1));
	json_object_object_add(proc, "oomScoreAdj", json_object_new_int(1000));
	json_object_object_add(c, "process", proc);

	(void)snprintf(rootfs, sizeof(rootfs), "%s/%s/rootfs",
		       cfg_str(CFG_IMAGES_DIR), r->image);
	json_object_object_add(root, "path", jstr(rootfs));
	json_object_object_add(root, "readonly", json_object_new_boolean(1));
	json_object_object_add(c, "root", root);
	json_object_object_add(c, "hostname", jstr("sandbox"));

	(void)snprintf(ws, sizeof(ws), "%s", r->ws);
	(void)snprintf(tmpsz, sizeof(tmpsz), "size=%lldm",
		       (long long)cfg_int(CFG_WORKSPACE_CAP_MB));
	const char *const procopts[] = { "nosuid", "noexec", "nodev", NULL };
	const char *const devopts[] = { "nosuid", "noexec", "strictatime", "mode=755",
					"size=1m", NULL };
	const char *const ptsopts[] = { "nosuid", "noexec", "newinstance",
					"ptmxmode=0666", "mode=0620", NULL };
	const char *const shmopts[] = { "nosuid", "noexec", "nodev", "mode=1777",
					"size=64m", NULL };
	const char *const tmpopts[] = { "nosuid", "noexec", "nodev", "mode=1777",
					tmpsz, NULL };
	const char *const wsopts[] = { "rbind", "nosuid", "noexec", "nodev", "rw",
				       NULL };
	const char *const initopts[] = { "bind", "ro", "nosuid", "nodev", NULL };
	add_mount(mounts, "/proc", "proc", "proc", procopts);
	add_mount(mounts, "/dev", "tmpfs", "tmpfs", devopts);
	add_mount(mounts, "/dev/pts", "devpts", "devpts", ptsopts);
	add_mount(mounts, "/dev/shm", "tmpfs", "shm", shmopts);
	add_mount(mounts, "/tmp", "tmpfs", "tmpfs", tmpopts);
	add_mount(mounts, "/workspace", "bind", ws, wsopts);
	add_mount(mounts, "/.sandbox-init", "bind", cfg_str(CFG_INIT_PATH), initopts);
	if (oci_is_runsc()) {
		char fifo[700];
		const char *const fifoopts[] = { "bind", "rw", "nosuid", "nodev", "noexec", NULL };
		status_fifo_path(r, fifo, sizeof(fifo));
		add_mount(mounts, "/.sandbox-status", "bind", fifo, fifoopts);
	}
	json_object_object_add(c, "mounts", mounts);

	/* The sandbox's uid 0 is an unprivileged host uid of its own range.
	 * runsc: gVisor's own kernel is the boundary; its sandbox runs as
	 * nobody in a user namespace of its own, and the run's uid is a
	 * private host uid (lifecycle.c), so no mapping is asked for. */
	static const char *const nstypes[] = { "pid", "network", "ipc", "uts",
					       "mount", "cgroup", "user", NULL };
	if (!oci_is_runsc()) {
		json_object_object_add(lx, "uidMappings", id_map(r->host_base));
		json_object_object_add(lx, "gidMappings", id_map(r->host_base));
	}
	for (const char *const *t = nstypes; *t; t++) {
		if (strcmp(*t, "user") == 0 && oci_is_runsc())
			continue;
		struct json_object *n = json_object_new_object();
		json_object_object_add(n, "type", jstr(*t));
		json_object_array_add(ns, n);
	}
	json_object_object_add(lx, "namespaces", ns);
	char cg[96];
	(void)snprintf(cg, sizeof(cg), "/sandbox/%s", r->cid);
	json_object_object_add(lx, "cgroupsPath", jstr(cg));
	int64_t membytes = (int64_t)r->memory_mb * 1048576;
	json_object_object_add(mem, "limit", json_object_new_int64(membytes));
	/* memory+swap equal to memory: no swap. */
	json_object_object_add(mem, "swap", json_object_new_int64(membytes));
	json_object_object_add(res, "memory", mem);
	json_object_object_add(cpu, "period", json_object_new_int(100000));
	json_object_object_add(cpu, "quota",
			       json_object_new_int64((int64_t)(r->cpu * 100000)));
	json_object_object_add(res, "cpu", cpu);
	json_object_object_add(pids, "limit", json_object_new_int(r->pids));
	json_object_object_add(res, "pids", pids);
	json_object_object_add(lx, "resources", res);
	static const char *const masked[] = {
		"/proc/acpi", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
		"/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug",
		"/proc/scsi", "/sys/firmware", "/sys/devices/virtual/powercap", NULL
	};
	static const char *const ro[] = { "/proc/asound", "/proc/bus", "/proc/fs",
					  "/proc/irq", "/proc/sys",
					  "/proc/sysrq-trigger", NULL };
	json_object_object_add(lx, "maskedPaths", strs(masked));
	json_object_object_add(lx, "readonlyPaths", strs(ro));
	json_object_object_add(lx, "seccomp", seccomp_profile());
	json_object_object_add(c, "linux", lx);
	return c;
}

int oci_write_bundle(struct run *r, char *err, size_t errlen)
{
	char path[700];
	struct json_object *c = build_config(r);
	const char *s = json_object_to_json_string_ext(c, JSON_C_TO_STRING_PLAIN);
	int fd, rc = 0;

	if (oci_is_runsc()) {
		status_fifo_path(r, path, sizeof(path));
		if (mkfifo(path, 0600) < 0 && errno != EEXIST) {
			(void)snprintf(err, errlen, "mkfifo %s: %s", path, strerror(errno));
			json_object_put(c);
			return -1;
		}
	}
	(void)snprintf(path, sizeof(path), "%s/config.json", r->dir);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || write(fd, s, strlen(s)) != (ssize_t)strlen(s)) {
		(void)snprintf(err, errlen, "writing %s: %s", path, strerror(errno));
		rc = -1;
	}
	if (fd >= 0)
		close(fd);
	json_object_put(c);
	return rc;
}

bool oci_is_runsc(void)
{
	return strstr(cfg_str(CFG_OCI_RUNTIME), "runsc") != NULL;
}

/* The read end of runsc's status FIFO (see the top of this file). Opened
 * before the sandbox starts, non-blocking: no writer yet is not an error.
 * A FIFO never opened by a writer reports no hang-up, so the supervisor
 * also ends the channel itself when the sandbox is gone. */
int oci_status_fifo(struct run *r)
{
	char path[700];

	status_fifo_path(r, path, sizeof(path));
	return open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW);
}

/* The first, gentle signal of a cancel: crun and runc sandboxes get it
 * through their init's host pid; runsc's host process is the sentry, which
 * would just die, so the TERM goes through `runsc kill` to the sandbox's
 * own init (a child nobody waits for: its exit lands with the orphans). */
void oci_term(struct run *r)
{
	if (!oci_is_runsc()) {
		(void)kill(r->init_pid, SIGTERM);
		return;
	}
	(void)oci_spawn(r, "kill", -1, -1, -1, -1);
}

/* Run `RUNTIME --root STATE --log FILE VERB ... CID` as a child. For
 * `run`, the sandbox inherits out/err as its stdout/stderr and status_fd
 * as fd 3. Returns the child's pid or -1. */
pid_t oci_spawn(struct run *r, const char *verb, int in_fd, int out_fd, int err_fd,
		int status_fd)
{
	char logarg[700], pidfile[700];
	const char *argv[24];
	int n = 0;
	pid_t pid;

	/* crun names its log driver; runc and runsc take a plain path. */
	(void)snprintf(logarg, sizeof(logarg), strstr(cfg_str(CFG_OCI_RUNTIME), "crun")
			       ? "--log=file:%s/crun.log" : "--log=%s/crun.log", r->dir);
	(void)snprintf(pidfile, sizeof(pidfile), "%s/init.pid", r->dir);
	argv[n++] = cfg_str(CFG_OCI_RUNTIME);
	argv[n++] = "--root";
	argv[n++] = sup->state_root;
	argv[n++] = logarg;
	if (oci_is_runsc()) {
		/* gVisor builds its own network stack; none at all is what we
		 * want. Our seccomp profile is applied inside the sandbox too
		 * (defence in depth below gVisor's own), and host FIFOs may be
		 * opened: the status channel is one. */
		argv[n++] = "--network=none";
		argv[n++] = "--oci-seccomp";
		argv[n++] = "--host-fifo=open";
	}
	argv[n++] = verb;
	if (strcmp(verb, "run") == 0) {
		/* create + start in one process (--detach: it returns once the
		 * sandbox runs); one exec of the runtime saved per run. */
		argv[n++] = "--detach";
		argv[n++] = "--bundle";
		argv[n++] = r->dir;
		if (!oci_is_runsc()) {
			argv[n++] = "--preserve-fds";
			argv[n++] = "1";
		}
		argv[n++] = "--pid-file";
		argv[n++] = pidfile;
	} else if (strcmp(verb, "delete") == 0) {
		argv[n++] = "--force";
	}
	argv[n++] = r->cid;
	if (strcmp(verb, "kill") == 0)
		argv[n++] = "TERM";
	argv[n] = NULL;

	pid = fork();
	if (pid != 0)
		return pid;

	/* child */
	sigset_t all;
	sigemptyset(&all);
	(void)sigprocmask(SIG_SETMASK, &all, NULL);
	int devnull = open("/dev/null", O_RDWR);
	(void)dup2(in_fd >= 0 ? in_fd : devnull, 0);
	(void)dup2(out_fd >= 0 ? out_fd : devnull, 1);
	(void)dup2(err_fd >= 0 ? err_fd : devnull, 2);
	if (status_fd >= 0)
		(void)dup2(status_fd, 3);
	execvp(argv[0], (char *const *)argv);
	_exit(127);
}

/* Empty sandbox cgroups left by containers that died with a supervisor
 * (crun delete could not run). A cgroup that still has tasks cannot be
 * removed, so a live sandbox of another supervisor is never touched. */
/* A container (cid) of a run this supervisor is running now. */
static bool is_live(const char *cid)
{
	return strncmp(cid, "sbx-", 4) == 0 && strlen(cid) == 40 && run_local(cid + 4);
}

/* Sandbox cgroups are shared by every supervisor of the host (another
 * stack's run may have just created its own, still empty): one is removed
 * only when it was empty at the previous pass too. */
#define SUSPECTS 512
static char suspects[SUSPECTS][48], seen_now[SUSPECTS][48];
static int nsuspects;

static bool suspected(const char *name)
{
	for (int i = 0; i < nsuspects; i++)
		if (strcmp(suspects[i], name) == 0)
			return true;
	return false;
}

static void cleanup_cgroups(void)
{
	static const char *const roots[] = { "/sys/fs/cgroup/sandbox", "/sys/fs/cgroup/memory/sandbox",
					     "/sys/fs/cgroup/pids/sandbox", "/sys/fs/cgroup/cpu/sandbox",
					     "/sys/fs/cgroup/cpuacct/sandbox", "/sys/fs/cgroup/cpuset/sandbox",
					     "/sys/fs/cgroup/devices/sandbox", "/sys/fs/cgroup/freezer/sandbox",
					     "/sys/fs/cgroup/blkio/sandbox", "/sys/fs/cgroup/hugetlb/sandbox",
					     "/sys/fs/cgroup/systemd/sandbox", NULL };
	int nseen = 0;

	for (const char *const *root = roots; *root; root++) {
		DIR *d = opendir(*root);
		struct dirent *e;
		if (!d)
			continue;
		while ((e = readdir(d)) != NULL) {
			char p[1024];
			if (strncmp(e->d_name, "sbx-", 4) != 0 || is_live(e->d_name) ||
			    strlen(e->d_name) >= sizeof(suspects[0]))
				continue;
			if (!suspected(e->d_name)) {
				bool dup = false;
				for (int i = 0; i < nseen; i++)
					dup |= strcmp(seen_now[i], e->d_name) == 0;
				if (!dup && nseen < SUSPECTS)
					(void)strlcpy_ok(seen_now[nseen++], e->d_name, sizeof(seen_now[0]));
				continue;
			}
			(void)snprintf(p, sizeof(p), "%s/%s", *root, e->d_name);
			/* Docker's container cgroup may sit below it (gone with
			 * its container); an rmdir of a busy one just fails. */
			(void)rmdir(p);
		}
		closedir(d);
	}
	memcpy(suspects, seen_now, sizeof(suspects[0]) * (size_t)nseen);
	nsuspects = nseen;
}

/* Containers in our state root that belong to no run this supervisor
 * tracks (after a crash: all of them; later, from the reaper: whatever a
 * failure left) are deleted (crun also removes their cgroups), and empty
 * sandbox cgroups of no live run removed. */
void oci_cleanup_leftovers(struct supervisor *s)
{
	char out[65536];
	const char *rt = cfg_str(CFG_OCI_RUNTIME);
	char *argv[] = { (char *)rt, "--root", s->state_root, "list", "--quiet", NULL };

	if (run_capture(argv, 10000, out, sizeof(out)) != 0) {
		cleanup_cgroups();
		return;
	}
	for (char *save = NULL, *id = strtok_r(out, "\n", &save); id;
	     id = strtok_r(NULL, "\n", &save)) {
		id = strtrim(id);
		if (strncmp(id, "sbx-", 4) != 0 || is_live(id))
			continue;
		char ignored[512];
		char *dargv[] = { (char *)rt, "--root", s->state_root, "delete",
				  "--force", id, NULL };
		int rc = run_capture(dargv, 10000, ignored, sizeof(ignored));
		log_msg(rc == 0 ? LOG_LVL_INFO : LOG_LVL_WARN,
			log_fields("container", id, NULL),
			"removed an orphaned container");
	}
	cleanup_cgroups();
}
