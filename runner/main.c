/*
 * sandbox-supervisor: the one process that owns everything with a
 * lifetime (runs, sandboxes, streams, the reaper).
 *
 * Theory of operation
 * -------------------
 * Runs as root: it is the only privileged process of the service. It
 * parses no client input; it reads small rows that sandbox-api already
 * validated from PostgreSQL and checks them again before acting.
 *
 * One thread, one event loop (epoll) over:
 *   - a signalfd: SIGTERM/SIGINT stop, SIGCHLD reaps children and hands
 *     each exit to the run it belongs to (lifecycle.c);
 *   - a timerfd ticking every SANDBOX_HEARTBEAT_SEC: the heartbeat into
 *     `nodes` (liveness for /readyz, runtime availability for /runtimes),
 *     lease renewal, queue TTL, a claim in case a notification was missed,
 *     and every SANDBOX_RUNTIME_PROBE_SEC a fresh runtime probe;
 *   - its PostgreSQL connection, LISTENing for new runs and cancels;
 *   - per run: stdout, stderr and status pipes and a timerfd (lifecycle.c).
 * No logic runs in signal handlers; there are no threads beside fork().
 *
 * Children: `crun create|start|delete` (short-lived helpers) and, as the
 * supervisor is a child subreaper, every sandbox's PID 1 once `crun
 * create` has exited. The supervisor is the only process that signals a
 * sandbox: SIGTERM then SIGKILL to its PID 1 on cancel, SIGKILL on a
 * timeout, which takes the sandbox's whole pid namespace down.
 *
 * Stop (SIGTERM): every sandbox is killed and its run ends `failed`
 * (supervisor_restart); the process exits once all are cleaned up. After a
 * crash, the next start removes leftover containers and workspace mounts
 * and ends or re-queues the runs the dead process held (queue.c).
 *
 * At start it prepares the host (cgroup layout for crun, hostprep.c) and
 * probes the runtimes (probe.c). PostgreSQL may be down at any time: every
 * tick retries the connection; nothing exits because of it.
 *
 * Options: -n check the configuration and exit; -c FILE config file.
 */
#include "supervisor.h"
#include "../lib/config.h"
#include "../lib/log.h"
#include "../lib/util.h"

#include <curl/curl.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/wait.h>

struct supervisor *sup;
static int epfd = -1;

int loop_add(struct watch *w, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.ptr = w };

	if (epoll_ctl(epfd, EPOLL_CTL_ADD, w->fd, &ev) < 0) {
		log_error("epoll_ctl add %d: %s", w->fd, strerror(errno));
		return -1;
	}
	return 0;
}

int loop_mod(struct watch *w, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.ptr = w };

	return epoll_ctl(epfd, EPOLL_CTL_MOD, w->fd, &ev);
}

void loop_del(struct watch *w)
{
	if (w->fd >= 0)
		(void)epoll_ctl(epfd, EPOLL_CTL_DEL, w->fd, NULL);
}

bool runtime_available(struct supervisor *s, const char *name)
{
	struct json_object *rt = NULL, *av = NULL;
	return json_object_object_get_ex(s->runtimes, name, &rt) &&
	       json_object_object_get_ex(rt, "available", &av) && json_object_get_boolean(av);
}

static void reprobe(struct supervisor *s)
{
	json_object_put(s->runtimes);
	s->runtimes = probe_runtimes();
	s->last_probe_ms = now_mono_ms();
	log_msg(LOG_LVL_INFO,
		log_fields("runtimes",
			   json_object_to_json_string_ext(s->runtimes,
							  JSON_C_TO_STRING_PLAIN),
			   NULL),
		"runtime probe");
	images_register(s);
	if (runtime_available(s, "docker"))
		images_docker_import(s);
}

static void on_signal(struct watch *w, uint32_t ev)
{
	struct signalfd_siginfo si;

	(void)ev;
	while (read(w->fd, &si, sizeof(si)) == sizeof(si)) {
		if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT) {
			if (!sup->stopping) {
				log_info("stopping: ending %d run(s)", sup->nruns);
				sup->stopping = true;
				runs_shutdown();
			}
		} else if (si.ssi_signo == SIGCHLD) {
			pid_t pid;
			int status;
			while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
				run_child_exited(pid, status);
		}
	}
}

static void on_tick(struct watch *w, uint32_t ev)
{
	uint64_t ticks;

	(void)ev;
	(void)!read(w->fd, &ticks, sizeof(ticks));
	if (now_mono_ms() - sup->last_probe_ms >= cfg_int(CFG_RUNTIME_PROBE_SEC) * 1000)
		reprobe(sup);
	(void)node_heartbeat(sup);
	if (!sup->stopping)
		queue_tick(sup);
}

static void on_second(struct watch *w, uint32_t ev)
{
	uint64_t ticks;

	(void)ev;
	(void)!read(w->fd, &ticks, sizeof(ticks));
	streams_tick();
}

static int event_loop(struct supervisor *s)
{
	sigset_t mask;
	struct epoll_event evs[64];
	struct watch sw, tw, secw;
	int64_t stop_deadline = 0;

	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGCHLD);
	sigaddset(&mask, SIGHUP);
	if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0)
		return -1;
	epfd = epoll_create1(EPOLL_CLOEXEC);
	sw.fd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	sw.fn = on_signal;
	tw.fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	tw.fn = on_tick;
	if (epfd < 0 || sw.fd < 0 || tw.fd < 0) {
		log_error("event loop setup: %s", strerror(errno));
		return -1;
	}
	struct itimerspec its = { .it_interval = { cfg_int(CFG_HEARTBEAT_SEC), 0 },
				  .it_value = { 0, 1 } };
	(void)timerfd_settime(tw.fd, 0, &its, NULL);
	(void)loop_add(&sw, EPOLLIN);
	(void)loop_add(&tw, EPOLLIN);
	/* Stream heartbeats (every 10 s per run) and client timeouts. */
	secw.fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	secw.fn = on_second;
	struct itimerspec one = { .it_interval = { 1, 0 }, .it_value = { 1, 0 } };
	(void)timerfd_settime(secw.fd, 0, &one, NULL);
	(void)loop_add(&secw, EPOLLIN);
	if (streams_listen() < 0)
		return -1;
	queue_recover(s);
	(void)queue_listen(s);

	for (;;) {
		if (s->stopping) {
			if (!stop_deadline)
				stop_deadline = now_mono_ms() + 15000;
			if (s->nruns == 0 || now_mono_ms() > stop_deadline)
				break;
		}
		int n = epoll_wait(epfd, evs, (int)ARRAY_SIZE(evs), s->stopping ? 200 : -1);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			log_error("epoll_wait: %s", strerror(errno));
			break;
		}
		for (int i = 0; i < n; i++) {
			struct watch *w = evs[i].data.ptr;
			w->fn(w, evs[i].events);
		}
		/* Notifications that arrived while other statements ran. */
		queue_poll(s);
	}
	close(secw.fd);
	close(tw.fd);
	close(sw.fd);
	close(epfd);
	return 0;
}

int main(int argc, char **argv)
{
	const char *cfgfile = NULL;
	bool check_only = false;
	char err[512];
	int opt;
	static struct supervisor s;

	sup = &s;
	log_init("sandbox-supervisor");
	while ((opt = getopt(argc, argv, "nc:")) != -1) {
		switch (opt) {
		case 'n': check_only = true; break;
		case 'c': cfgfile = optarg; break;
		default:
			fprintf(stderr, "usage: sandbox-supervisor [-n] [-c config]\n");
			return 2;
		}
	}
	if (cfg_load(cfgfile, err, sizeof(err)) < 0) {
		log_error("configuration: %s", err);
		fprintf(stderr, "sandbox-supervisor: configuration error: %s\n", err);
		return 1;
	}
	log_set_level(log_level_parse(cfg_str(CFG_LOG_LEVEL)));
	if (check_only) {
		cfg_dump(stdout);
		printf("# configuration ok\n");
		return 0;
	}
	if (geteuid() != 0)
		log_warn("not running as root: containers cannot be created");

	(void)gethostname(s.hostname, sizeof(s.hostname) - 1);
	(void)strlcpy_ok(s.node_id,
			 *cfg_str(CFG_NODE_ID) ? cfg_str(CFG_NODE_ID) : s.hostname,
			 sizeof(s.node_id));
	(void)snprintf(s.state_root, sizeof(s.state_root), "%s/oci-state",
		       cfg_str(CFG_DATA_ROOT));
	(void)mkdir(cfg_str(CFG_DATA_ROOT), 0711);
	(void)mkdir(s.state_root, 0700);
	/* Every stream client is a socket: allow as many as the kernel lets
	 * us (the hard limit). */
	struct rlimit nf;
	if (getrlimit(RLIMIT_NOFILE, &nf) == 0 && nf.rlim_cur < nf.rlim_max) {
		nf.rlim_cur = nf.rlim_max > 65536 ? 65536 : nf.rlim_max;
		(void)setrlimit(RLIMIT_NOFILE, &nf);
	}
	/* Sandboxes' PID 1s are re-parented to us once `crun create` exits,
	 * so their exit status comes straight to our SIGCHLD. */
	(void)prctl(PR_SET_CHILD_SUBREAPER, 1);
	curl_global_init(CURL_GLOBAL_DEFAULT);
	signal(SIGPIPE, SIG_IGN);
	(void)hostprep_cgroups();
	db_init(&s.db, cfg_str(CFG_DATABASE_URL));
	reprobe(&s);
	log_info("supervisor started as node %s", s.node_id);

	int rc = event_loop(&s);

	log_info("shutting down");
	node_retire(&s);
	json_object_put(s.runtimes);
	db_close(&s.db);
	curl_global_cleanup();
	cfg_free();
	return rc < 0 ? 1 : 0;
}
