/*
 * sandbox-api: the FastCGI side of the sandbox service.
 *
 * Theory of operation
 * -------------------
 * nginx terminates TLS and speaks FastCGI to one unix socket
 * (SANDBOX_API_SOCKET). This process opens that socket, and when started
 * as root it hands the socket to SANDBOX_API_USER and drops to that user
 * (setgroups(0), setresgid, setresuid) before it reads a single byte from
 * a client: request parsing never runs with privileges.
 *
 * The master then forks SANDBOX_API_WORKERS workers that all accept() on
 * the inherited socket. Each worker is single-threaded, serves one request
 * at a time and owns one PostgreSQL connection (re-established on demand,
 * so a database restart costs failed requests, not processes). Workers die
 * with the master (PR_SET_PDEATHSIG); the master respawns a worker that
 * exits, at most one per second so a crash loop cannot spin.
 *
 * The master waits for signals synchronously (sigwaitinfo): SIGCHLD →
 * respawn, SIGTERM/SIGINT → TERM every worker, wait, exit. No logic runs
 * in signal handlers. The api never touches a container: it writes rows,
 * NOTIFYs the supervisor and reads what the supervisor reports.
 *
 * Options: -n check the configuration and exit; -c FILE config file.
 */
#include "request.h"
#include "router.h"
#include "metrics.h"
#include "../lib/config.h"
#include "../lib/crypto.h"
#include "../lib/log.h"
#include "../lib/util.h"

#include <ctype.h>
#include <errno.h>
#include <fcgiapp.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>

#define MAX_WORKERS 256

static pid_t workers[MAX_WORKERS];
static int nworkers;

static bool request_id_ok(const char *s)
{
	size_t n = 0;

	if (!s)
		return false;
	for (; s[n]; n++)
		if (!isalnum((unsigned char)s[n]) && !strchr("-_.:", s[n]))
			return false;
	return n > 0 && n <= 128;
}

static void handle(FCGX_Request *fr, struct db *db)
{
	struct request r = { 0 };
	int64_t t0 = now_mono_ms();
	struct timespec t0us;
	clock_gettime(CLOCK_MONOTONIC, &t0us);
	const char *accept;

	r.fcgx = fr;
	r.route = -1;
	r.db = db;
	r.method = req_param(&r, "REQUEST_METHOD");
	/* Routes match the raw path as the client sent it (REQUEST_URI up to
	 * '?'), not nginx's decoded and dot-resolved $uri: a traversal in a
	 * file path must reach the handler that refuses it. */
	char *raw = NULL;
	const char *ru = req_param(&r, "REQUEST_URI");
	if (ru && strncmp(ru, "/api/", 5) == 0) {
		raw = xstrdup(ru);
		raw[strcspn(raw, "?#")] = '\0';
		r.path = raw;
	} else {
		r.path = req_param(&r, "DOCUMENT_URI");
	}
	r.query = req_param(&r, "QUERY_STRING");
	if (!r.method)
		r.method = "GET";
	if (!r.path)
		r.path = "/";
	/* nginx decides the id (an incoming X-Request-Id if sane, else its
	 * own); check it again here rather than trust it blindly. */
	if (request_id_ok(req_param(&r, "REQUEST_ID")))
		(void)strlcpy_ok(r.request_id, req_param(&r, "REQUEST_ID"),
				 sizeof(r.request_id));
	else
		uuid_v4(r.request_id);
	accept = req_param(&r, "HTTP_ACCEPT");
	r.want_problem = accept && strcasestr(accept, "application/problem+json");
	log_set_request_id(r.request_id);

	route_request(&r);
	struct timespec te;
	clock_gettime(CLOCK_MONOTONIC, &te);
	metrics_request(r.route, r.status,
			(int64_t)(te.tv_sec - t0us.tv_sec) * 1000000 +
				(te.tv_nsec - t0us.tv_nsec) / 1000);

	char dur[32], st[8];
	(void)snprintf(dur, sizeof(dur), "%lld", (long long)(now_mono_ms() - t0));
	(void)snprintf(st, sizeof(st), "%d", r.status);
	log_msg(r.status >= 500 ? LOG_LVL_WARN : LOG_LVL_INFO,
		log_fields("method", r.method, "path", r.path, "status", st,
			   "duration_ms", dur, "user_id",
			   r.authenticated ? r.user.id : NULL, NULL),
		"request");
	log_set_request_id(NULL);
	for (int i = 0; i < r.nparams; i++)
		free((void *)r.params[i]);
	free(r.body);
	free(raw);
}

static void worker_main(int listen_fd, sigset_t *oldmask)
{
	FCGX_Request fr;
	struct db db;

	(void)prctl(PR_SET_PDEATHSIG, SIGTERM);
	(void)sigprocmask(SIG_SETMASK, oldmask, NULL);
	signal(SIGPIPE, SIG_IGN);
	db_init(&db, cfg_str(CFG_DATABASE_URL));
	if (FCGX_InitRequest(&fr, listen_fd, 0) != 0) {
		log_error("FCGX_InitRequest failed");
		_exit(1);
	}
	while (FCGX_Accept_r(&fr) >= 0) {
		handle(&fr, &db);
		FCGX_Finish_r(&fr);
	}
	db_close(&db);
	_exit(0);
}

static pid_t spawn(int listen_fd, sigset_t *oldmask)
{
	pid_t pid = fork();

	if (pid == 0)
		worker_main(listen_fd, oldmask);
	if (pid < 0)
		log_error("fork: %s", strerror(errno));
	return pid;
}

static int drop_privileges(const char *user, const char *sock)
{
	struct passwd *pw;

	if (geteuid() != 0)
		return 0;
	pw = getpwnam(user);
	if (!pw) {
		log_error("SANDBOX_API_USER=%s: no such user", user);
		return -1;
	}
	if (chown(sock, pw->pw_uid, pw->pw_gid) < 0 || chmod(sock, 0660) < 0) {
		log_error("socket %s: %s", sock, strerror(errno));
		return -1;
	}
	/* Order matters: groups and gid while we still may, uid last. */
	if (setgroups(0, NULL) < 0 ||
	    setresgid(pw->pw_gid, pw->pw_gid, pw->pw_gid) < 0 ||
	    setresuid(pw->pw_uid, pw->pw_uid, pw->pw_uid) < 0) {
		log_error("dropping privileges to %s: %s", user, strerror(errno));
		return -1;
	}
	if (setresuid(0, 0, 0) == 0) {
		log_error("privileges could be regained after the drop");
		return -1;
	}
	return 0;
}

static int open_socket(const char *path)
{
	struct stat st;

	/* Replace a stale socket from a previous run, never another file. */
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			log_error("%s exists and is not a socket", path);
			return -1;
		}
		(void)unlink(path);
	}
	if (FCGX_Init() != 0)
		return -1;
	/* A deep backlog: bursts (a thousand stream clients at once) wait for a
	 * worker instead of being refused. */
	int fd = FCGX_OpenSocket(path, 4096);
	if (fd < 0) {
		log_error("cannot listen on %s", path);
		return -1;
	}
	(void)chmod(path, 0660);
	return fd;
}

int main(int argc, char **argv)
{
	const char *cfgfile = NULL;
	bool check_only = false;
	char err[512];
	int opt;
	sigset_t mask, oldmask;

	log_init("sandbox-api");
	while ((opt = getopt(argc, argv, "nc:")) != -1) {
		switch (opt) {
		case 'n': check_only = true; break;
		case 'c': cfgfile = optarg; break;
		default:
			fprintf(stderr, "usage: sandbox-api [-n] [-c config]\n");
			return 2;
		}
	}
	if (cfg_load(cfgfile, err, sizeof(err)) < 0) {
		log_error("configuration: %s", err);
		fprintf(stderr, "sandbox-api: configuration error: %s\n", err);
		return 1;
	}
	log_set_level(log_level_parse(cfg_str(CFG_LOG_LEVEL)));
	if (cfg_bool(CFG_WS_SIGNED_URLS) && strlen(cfg_str(CFG_WS_SIGNING_SECRET)) < 32) {
		fprintf(stderr, "sandbox-api: configuration error: SANDBOX_WS_SIGNED_URLS "
				"needs SANDBOX_WS_SIGNING_SECRET of at least 32 characters\n");
		return 1;
	}
	if (check_only) {
		cfg_dump(stdout);
		printf("# configuration ok\n");
		return 0;
	}

	int fd = open_socket(cfg_str(CFG_API_SOCKET));
	if (fd < 0)
		return 1;
	if (drop_privileges(cfg_str(CFG_API_USER), cfg_str(CFG_API_SOCKET)) < 0)
		return 1;

	sigemptyset(&mask);
	sigaddset(&mask, SIGCHLD);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	(void)sigprocmask(SIG_BLOCK, &mask, &oldmask);

	if (metrics_init() < 0)
		log_warn("metrics: no shared memory; api counters disabled");
	nworkers = (int)cfg_int(CFG_API_WORKERS);
	for (int i = 0; i < nworkers; i++)
		workers[i] = spawn(fd, &oldmask);
	log_info("listening on %s with %d workers", cfg_str(CFG_API_SOCKET),
		 nworkers);

	int64_t last_spawn = 0;
	for (;;) {
		siginfo_t si;
		int sig = sigwaitinfo(&mask, &si);
		if (sig < 0)
			continue;
		if (sig == SIGTERM || sig == SIGINT)
			break;
		if (sig != SIGCHLD)
			continue;
		pid_t pid;
		int status;
		while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
			for (int i = 0; i < nworkers; i++) {
				if (workers[i] != pid)
					continue;
				log_warn("worker %d exited (status %d); respawning",
					 (int)pid, status);
				/* At most one respawn a second. */
				int64_t now = now_mono_ms();
				if (now - last_spawn < 1000)
					(void)usleep((useconds_t)(1000 - (now - last_spawn)) * 1000);
				last_spawn = now_mono_ms();
				workers[i] = spawn(fd, &oldmask);
			}
		}
	}
	log_info("shutting down");
	for (int i = 0; i < nworkers; i++)
		if (workers[i] > 0)
			(void)kill(workers[i], SIGTERM);
	for (int i = 0; i < nworkers; i++)
		if (workers[i] > 0)
			(void)waitpid(workers[i], NULL, 0);
	cfg_free();
	return 0;
}
