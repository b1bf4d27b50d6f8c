/*
 * sandbox-init: PID 1 inside every sandbox.
 *
 * Theory of operation
 * -------------------
 * A small static binary bind-mounted read-only at /.sandbox-init. The OCI
 * runtime starts it as root of the sandbox's user namespace (an
 * unprivileged uid on the host) holding only CAP_SETUID and CAP_SETGID,
 * with no_new_privs and the seccomp filter already applied, in fresh pid,
 * mount, network, ipc and uts namespaces.
 *
 *   supervisor ──pipes──> crun ──> sandbox-init (PID 1, uid 0 in userns)
 *        ^   stdout/stderr of the run go straight to the supervisor
 *        └── fd 3: the status channel (one line on start, the verdict at end;
 *                  with -S a file or FIFO the runtime mounted instead:
 *                  docker and runsc cannot pass fd 3)
 *                           └──fork──> the run's command (uid/gid -u/-g)
 *
 * Keeper and inside (isolate's box_keeper/box_inside): the child sets its
 * credentials in the order setgroups(0), setresgid, setresuid (which clears
 * every capability), applies the rlimits, changes into the workspace and
 * execs the command; an exec failure travels back over a close-on-exec
 * error pipe. The parent drops its own capabilities, then only reaps
 * zombies, forwards SIGTERM/SIGINT/SIGHUP to every process of the sandbox
 * and, when the command exits, writes the verdict (STYLE 13: one field per
 * line) to fd 3 and exits with the command's status, which takes the whole
 * pid namespace down with it. The run's processes cannot touch fd 3 (closed
 * on exec) nor ptrace PID 1 (another uid, no capabilities).
 *
 * Usage: sandbox-init --probe
 *        sandbox-init -u UID -g GID [-n NOFILE] [-p NPROC] [-t CPU_SEC]
 *                     [-w DIR] -- COMMAND [ARGS...]
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <grp.h>
#include <linux/capability.h>

#define STATUS_FD 3

static int status_fd = -1;

static void report(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void report(const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	/* Without a status channel (a runtime that cannot pass fd 3), the
	 * verdict goes to stderr so it is not lost. */
	if (n > 0)
		(void)!write(status_fd >= 0 ? status_fd : STDERR_FILENO, buf,
			     (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1);
}

static long parse_num(const char *s, long min, long max, const char *what)
{
	char *end = NULL;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || !*s || *end || v < min || v > max) {
		fprintf(stderr, "sandbox-init: bad %s '%s'\n", what, s);
		exit(126);
	}
	return v;
}

static double now_sec(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int set_limit(int res, rlim_t v)
{
	struct rlimit rl = { v, v };
	return setrlimit(res, &rl);
}

/* After the fork the keeper needs one capability: CAP_KILL, to forward
 * SIGTERM to the run's processes (another uid). Everything else goes. */
static void drop_caps(void)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[2];

	memset(d, 0, sizeof(d));
	d[0].effective = d[0].permitted = 1u << CAP_KILL;
	(void)syscall(SYS_capset, &h, d);
}

/* Started as the run's uid already (a runtime that sets the user itself,
 * with every capability dropped): nothing to drop, nothing to switch. */
static int rootless;

static void __attribute__((noreturn))
inside(int errfd, uid_t uid, gid_t gid, long nofile, long nproc, long cpu,
       const char *dir, char **argv, sigset_t *oldmask)
{
	int err, step = 0;

	(void)sigprocmask(SIG_SETMASK, oldmask, NULL);
	(void)setsid();
	/* Empty the bounding set: nothing the command runs can ever regain a
	 * capability (no_new_privs already forbids setuid binaries). */
	step = 1;
	for (int cap = 0; rootless == 0 && cap <= 63; cap++)
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL)
			goto fail;
	step = 2;
	/* Limits first, while we may still raise nothing but lower all. */
	if ((step = 2, set_limit(RLIMIT_CORE, 0) < 0) ||
	    (nofile > 0 && set_limit(RLIMIT_NOFILE, (rlim_t)nofile) < 0) ||
	    (nproc > 0 && set_limit(RLIMIT_NPROC, (rlim_t)nproc) < 0) ||
	    (cpu > 0 && set_limit(RLIMIT_CPU, (rlim_t)cpu) < 0))
		goto fail;
	/* Credentials: groups and gid before uid, uid last; the switch away
	 * from uid 0 clears every capability. */
	step = 3;
	if (!rootless && setgroups(0, NULL) < 0)
		goto fail;
	step = 4;
	if (!rootless && setresgid(gid, gid, gid) < 0)
		goto fail;
	step = 5;
	if (!rootless && setresuid(uid, uid, uid) < 0)
		goto fail;
	if (getuid() != uid || getgid() != gid) {
		errno = EPERM;
		goto fail;
	}
	step = 6;
	if (getuid() == 0 || geteuid() == 0) {
		errno = EPERM;
		goto fail;
	}
	step = 7;
	if (dir && chdir(dir) < 0)
		goto fail;
	step = 8;
	execvp(argv[0], argv);
fail:
	err = errno;
	int msg[2] = { err, step };
	(void)!write(errfd, msg, sizeof(msg));
	_exit(127);
}

int main(int argc, char **argv)
{
	long uid = -1, gid = -1, nofile = 0, nproc = 0, cpu = 0;
	const char *dir = "/workspace";
	sigset_t mask, oldmask;
	int opt, ep[2];
	pid_t child;

	if (argc == 2 && strcmp(argv[1], "--probe") == 0) {
		puts("sandbox-init probe ok");
		return 0;
	}
	const char *status_path = NULL;
	while ((opt = getopt(argc, argv, "+u:g:n:p:t:w:S:")) != -1) {
		switch (opt) {
		case 'u': uid = parse_num(optarg, 1, 0x7ffffffe, "uid"); break;
		case 'g': gid = parse_num(optarg, 1, 0x7ffffffe, "gid"); break;
		case 'n': nofile = parse_num(optarg, 1, 1 << 20, "nofile"); break;
		case 'p': nproc = parse_num(optarg, 1, 1 << 22, "nproc"); break;
		case 't': cpu = parse_num(optarg, 1, 1 << 24, "cpu seconds"); break;
		case 'w': dir = optarg; break;
		case 'S': status_path = optarg; break;
		default:
			fprintf(stderr, "usage: sandbox-init -u UID -g GID [-n N] [-p N] "
					"[-t SEC] [-w DIR] [-S STATUSFILE] -- CMD...\n");
			return 126;
		}
	}
	if (optind >= argc || uid < 1 || gid < 1) {
		fprintf(stderr, "sandbox-init: need -u, -g and a command\n");
		return 126;
	}
	if (status_path) {
		/* A file (docker) or a FIFO (runsc) the runtime mounted for
		 * us: no fd 3 across them. Non-blocking, so a FIFO nobody
		 * reads any more (the supervisor is gone) cannot hang init;
		 * each report is one write smaller than PIPE_BUF. */
		status_fd = open(status_path,
				 O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	} else if (fcntl(STATUS_FD, F_GETFD) >= 0) {
		status_fd = STATUS_FD;
		(void)fcntl(status_fd, F_SETFD, FD_CLOEXEC);
	}
	rootless = geteuid() != 0;
	if (rootless && (geteuid() != (uid_t)uid || getegid() != (gid_t)gid)) {
		report("status=exec_failed\nerrno=%d\nmessage=started as uid %d, not %ld\n", EPERM,
		       (int)geteuid(), uid);
		return 126;
	}

	sigemptyset(&mask);
	sigaddset(&mask, SIGCHLD);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	sigaddset(&mask, SIGQUIT);
	(void)sigprocmask(SIG_BLOCK, &mask, &oldmask);

	if (pipe2(ep, O_CLOEXEC) < 0)
		return 126;
	double t0 = now_sec();
	child = fork();
	if (child < 0) {
		report("status=exec_failed\nerrno=%d\n", errno);
		return 126;
	}
	if (child == 0)
		inside(ep[1], (uid_t)uid, (gid_t)gid, nofile, nproc, cpu, dir,
		       argv + optind, &oldmask);
	close(ep[1]);
	if (!rootless)
		drop_caps();
	(void)prctl(PR_SET_DUMPABLE, 0);

	/* What failed, for the run's message: the command itself (ENOENT,
	 * EACCES) or a step before it. */
	static const char *const steps[] = { "setup", "dropping the bounding set",
					      "rlimits", "setgroups", "setresgid",
					      "setresuid", "credentials check",
					      "chdir to the workspace", "exec" };
	int msg[2] = { 0, 0 };
	ssize_t n = read(ep[0], msg, sizeof(msg));
	close(ep[0]);
	if (n == (ssize_t)sizeof(msg)) {
		(void)waitpid(child, NULL, 0);
		int st = msg[1] >= 0 && msg[1] <= 8 ? msg[1] : 0;
		if (st == 8)
			report("status=exec_failed\nerrno=%d\nmessage=%s\n", msg[0],
			       strerror(msg[0]));
		else
			report("status=exec_failed\nerrno=%d\nmessage=%s: %s\n", msg[0],
			       steps[st], strerror(msg[0]));
		return 127;
	}
	report("started=1\n");

	int status = 0, code = 0;
	struct rusage ru;
	memset(&ru, 0, sizeof(ru));
	for (;;) {
		siginfo_t si;
		int sig = sigwaitinfo(&mask, &si);
		if (sig < 0)
			continue;
		if (sig != SIGCHLD) {
			/* Forward to every process of the sandbox. */
			(void)kill(-1, sig);
			continue;
		}
		int done = 0;
		pid_t p;
		int st;
		struct rusage r;
		while ((p = wait4(-1, &st, WNOHANG, &r)) > 0) {
			if (p == child) {
				status = st;
				ru = r;
				done = 1;
			}
		}
		if (done)
			break;
	}
	double wall = now_sec() - t0;
	double cpu_used = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
			  (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
	if (WIFEXITED(status)) {
		code = WEXITSTATUS(status);
		report("status=exited\nexitcode=%d\n", code);
	} else if (WIFSIGNALED(status)) {
		code = 128 + WTERMSIG(status);
		report("status=signaled\nsignal=%d\nexitcode=%d\n", WTERMSIG(status), code);
	}
	report("time=%.3f\ntime-wall=%.3f\nmax-rss=%ld\nend=1\n", cpu_used, wall,
	       ru.ru_maxrss);
	return code;
}
