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
 *   - a signalfd: SIGTERM/SIGINT stop, SIGCHLD reaps children;
 *   - a timerfd ticking every SANDBOX_HEARTBEAT_SEC: the heartbeat into
 *     `nodes` (liveness for /readyz, runtime availability for /runtimes)
 *     and, every SANDBOX_RUNTIME_PROBE_SEC, a fresh runtime probe.
 * No logic runs in signal handlers; there are no threads beside fork().
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
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <sys/wait.h>

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
}

static int event_loop(struct supervisor *s)
{
	sigset_t mask;
	struct epoll_event ev, evs[16];
	int ep, sfd, tfd;

	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGCHLD);
	sigaddset(&mask, SIGHUP);
	if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0)
		return -1;
	sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	ep = epoll_create1(EPOLL_CLOEXEC);
	if (sfd < 0 || tfd < 0 || ep < 0) {
		log_error("event loop setup: %s", strerror(errno));
		return -1;
	}
	struct itimerspec its = { .it_interval = { cfg_int(CFG_HEARTBEAT_SEC), 0 },
				  .it_value = { 0, 1 } };
	(void)timerfd_settime(tfd, 0, &its, NULL);
	ev.events = EPOLLIN;
	ev.data.fd = sfd;
	(void)epoll_ctl(ep, EPOLL_CTL_ADD, sfd, &ev);
	ev.data.fd = tfd;
	(void)epoll_ctl(ep, EPOLL_CTL_ADD, tfd, &ev);

	bool stop = false;
	while (!stop) {
		int n = epoll_wait(ep, evs, (int)ARRAY_SIZE(evs), -1);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			log_error("epoll_wait: %s", strerror(errno));
			break;
		}
		for (int i = 0; i < n; i++) {
			int fd = evs[i].data.fd;
			if (fd == sfd) {
				struct signalfd_siginfo si;
				while (read(sfd, &si, sizeof(si)) == sizeof(si)) {
					if (si.ssi_signo == SIGTERM ||
					    si.ssi_signo == SIGINT)
						stop = true;
					else if (si.ssi_signo == SIGCHLD)
						while (waitpid(-1, NULL, WNOHANG) > 0)
							;
				}
			} else if (fd == tfd) {
				uint64_t ticks;
				(void)!read(tfd, &ticks, sizeof(ticks));
				if (now_mono_ms() - s->last_probe_ms >=
				    cfg_int(CFG_RUNTIME_PROBE_SEC) * 1000)
					reprobe(s);
				(void)node_heartbeat(s);
			}
		}
	}
	close(ep);
	close(tfd);
	close(sfd);
	return 0;
}

int main(int argc, char **argv)
{
	const char *cfgfile = NULL;
	bool check_only = false;
	char err[512];
	int opt;
	struct supervisor s = { 0 };

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
