/* lifecycle.c: the run state machine.
 *
 *   state        event                      → action, next state
 *   ---------    -------------------------  ---------------------------------
 *   (claimed)    run_begin                  workspace, bundle, pipes,
 *                                           `crun run --detach` → CREATING
 *   CREATING     run exited 0               read init pid → STARTING
 *   CREATING     run failed                 provision_failed → (drain)
 *   STARTING     status "started=1"         phase running, exec timer
 *                                           → RUNNING
 *   CREATING/    startup deadline           timed_out/startup_timeout, KILL
 *   STARTING
 *   RUNNING      exec deadline              timed_out/execution_timeout, KILL
 *   any          cancel                     killed/canceled_by_user, TERM,
 *                                           KILL after the grace period
 *   any          init exited + pipes at EOF usage from cgroups, verdict,
 *                                           end frame, terminal row,
 *                                           `crun delete` → DELETING
 *   DELETING     delete exited              unmount workspace → (freed)
 *
 * The result is recorded before the sandbox is deleted: a client sees the
 * end as soon as the command's end is known; the slot stays taken until
 * the cleanup is through.
 *
 * The first cause of an end wins (a cancel during a timeout stays a
 * timeout). Everything happens in the event loop: child processes report
 * through SIGCHLD, pipes and timers through epoll. */
#include "supervisor.h"
#include "../lib/config.h"
#include "../lib/crypto.h"
#include "../lib/log.h"
#include "../lib/util.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/wait.h>

static void maybe_finish(struct run *r);
static void record_end(struct run *r);

struct run *run_local(const char *id)
{
	for (struct run *r = sup->runs; r; r = r->next)
		if (strncmp(r->id, id, 36) == 0)
			return r;
	return NULL;
}

struct json_object *run_fields(const struct run *r)
{
	struct json_object *v = NULL;
	const char *rid = json_object_object_get_ex(r->row, "request_id", &v) && v
				  ? json_object_get_string(v) : NULL;
	struct json_object *f = log_fields("run_id", r->id, "user_id", r->user_id,
					   "request_id", rid, NULL);
	if (r->session_id[0])
		json_object_object_add(f, "session_id", json_object_new_string(r->session_id));
	return f;
}

static int row_int(struct json_object *row, const char *k, int def)
{
	struct json_object *v;
	return json_object_object_get_ex(row, k, &v) && v ? json_object_get_int(v) : def;
}

static const char *row_str(struct json_object *row, const char *k)
{
	struct json_object *v;
	return json_object_object_get_ex(row, k, &v) && v ? json_object_get_string(v) : "";
}

/* The audit event's JSON log line (its row is written by the database
 * trigger on runs): who, where, what, under which policy; no code, no
 * secrets. */
static void audit_log(struct run *r, const char *event, const char *exit_code)
{
	struct json_object *f = log_fields(
		"event", event, "run_id", r->id, "user_id", r->user_id, "runtime", r->runtime,
		"base_image", r->base_image, "image_digest", row_str(r->row, "image_digest"),
		"policy_hash", row_str(r->row, "policy_hash"),
		"spec_version", row_str(r->row, "spec_version"),
		"source", row_str(r->row, "source"), "node_id", sup->node_id, NULL);
	if (r->final_phase && r->ended) {
		json_object_object_add(f, "phase", json_object_new_string(r->final_phase));
		json_object_object_add(f, "reason_code",
				       r->reason ? json_object_new_string(r->reason) : NULL);
		json_object_object_add(f, "exit_code",
				       exit_code ? json_object_new_string(exit_code) : NULL);
	}
	/* The run's request id ties these lines to the POST that created it. */
	char saved[129];
	(void)strlcpy_ok(saved, log_request_id(), sizeof(saved));
	log_set_request_id(row_str(r->row, "request_id"));
	log_msg(LOG_LVL_INFO, f, "%s", event);
	log_set_request_id(saved[0] ? saved : NULL);
}

void end_with(struct run *r, const char *phase, const char *reason,
		     const char *message)
{
	if (r->final_phase)
		return;
	r->final_phase = phase;
	r->reason = reason;
	(void)strlcpy_ok(r->message, message ? message : "", sizeof(r->message));
}

void arm_timer(struct run *r)
{
	int64_t next = INT64_MAX, now = now_mono_ms();
	struct itimerspec its = { 0 };

	if (r->state < RS_RUNNING && r->startup_deadline)
		next = r->startup_deadline;
	if (r->state == RS_RUNNING && r->exec_deadline && r->exec_deadline < next)
		next = r->exec_deadline;
	if (r->kill_deadline && r->kill_deadline < next)
		next = r->kill_deadline;
	if (r->init_exited || next == INT64_MAX) {
		(void)timerfd_settime(r->timer_w.fd, 0, &its, NULL);
		return;
	}
	int64_t in = next - now;
	if (in < 1)
		in = 1;
	its.it_value.tv_sec = in / 1000;
	its.it_value.tv_nsec = (in % 1000) * 1000000;
	(void)timerfd_settime(r->timer_w.fd, 0, &its, NULL);
}

/* Stop the sandbox now: SIGKILL to its PID 1 takes the whole pid namespace
 * down; before init exists, kill `crun create` itself. */
void kill_now(struct run *r)
{
	if (r->docker) {
		/* Running: the driver asks dockerd for a KILL. Not yet: the
		 * driver itself goes (the delete that follows removes whatever
		 * container it made). */
		if (r->helper > 0 && r->helper_kind == CHILD_CREATE)
			(void)kill(r->helper, r->state == RS_RUNNING ? SIGUSR2 : SIGKILL);
		return;
	}
	if (r->init_pid > 0 && !r->init_exited)
		(void)kill(r->init_pid, SIGKILL);
	else if (r->helper > 0 && r->helper_kind == CHILD_CREATE)
		(void)kill(r->helper, SIGKILL);
}

static void on_timer(struct watch *w, uint32_t ev)
{
	struct run *r = w->ctx;
	uint64_t n;
	int64_t now = now_mono_ms();

	(void)ev;
	(void)!read(w->fd, &n, sizeof(n));
	if (r->init_exited)
		return;
	if (r->kill_deadline && now >= r->kill_deadline) {
		log_msg(LOG_LVL_INFO, run_fields(r), "grace period over: SIGKILL");
		r->kill_deadline = 0;
		kill_now(r);
	}
	if (r->state < RS_RUNNING && r->startup_deadline && now >= r->startup_deadline) {
		end_with(r, "timed_out", "startup_timeout",
			 "the sandbox did not start within startup_timeout_sec");
		r->startup_deadline = 0;
		kill_now(r);
	}
	if (r->state == RS_RUNNING && r->exec_deadline && now >= r->exec_deadline) {
		end_with(r, "timed_out", "execution_timeout",
			 "the command ran longer than timeout_sec");
		r->exec_deadline = 0;
		kill_now(r);
	}
	arm_timer(r);
}

static void db_phase_running(struct run *r)
{
	const char *p[] = { r->id };
	if (!db_command(&sup->db,
			"UPDATE runs SET phase = 'running', running_at = now() "
			"WHERE id = $1 AND phase = 'starting'",
			1, p))
		log_msg(LOG_LVL_WARN, run_fields(r), "recording phase running: %s",
			sup->db.last_error);
}

static void mark_running(struct run *r)
{
	if (r->state >= RS_RUNNING || r->final_phase)
		return;
	r->state = RS_RUNNING;
	r->t_running = now_mono_ms();
	r->exec_deadline = r->t_running + (int64_t)r->timeout_sec * 1000;
	db_phase_running(r);
	audit_log(r, "sandbox.run.running", NULL);
	struct json_object *d = json_object_new_object();
	json_object_object_add(d, "run_id", json_object_new_string(r->id));
	json_object_object_add(d, "runtime", json_object_new_string(r->runtime));
	json_object_object_add(d, "base_image", json_object_new_string(r->base_image));
	frames_event(r, "start", d);
	d = json_object_new_object();
	json_object_object_add(d, "phase", json_object_new_string("running"));
	frames_event(r, "phase", d);
	arm_timer(r);
}

static void on_status(struct watch *w, uint32_t ev)
{
	struct run *r = w->ctx;
	char buf[512];

	(void)ev;
	for (;;) {
		ssize_t n = read(w->fd, buf, sizeof(buf));
		if (n > 0) {
			size_t room = sizeof(r->verdict) - 1 - r->verdict_len;
			size_t take = (size_t)n < room ? (size_t)n : room;
			memcpy(r->verdict + r->verdict_len, buf, take);
			r->verdict_len += take;
			r->verdict[r->verdict_len] = '\0';
			if (strstr(r->verdict, "started=1\n"))
				mark_running(r);
			continue;
		}
		if (n < 0 && errno == EAGAIN)
			return;
		break;
	}
	loop_del(w);
	close(w->fd);
	w->fd = -1;
	r->status_eof = true;
	maybe_finish(r);
}

static void on_output(struct watch *w, uint32_t ev)
{
	struct output *o = w->ctx;
	struct run *r = o->run;
	unsigned char buf[8192];

	(void)ev;
	/* Bounded work per wake-up so one chatty run cannot starve others. */
	for (int i = 0; i < 16; i++) {
		ssize_t n = read(w->fd, buf, sizeof(buf));
		if (n > 0) {
			frames_output(r, o, buf, (size_t)n, false);
			continue;
		}
		if (n < 0 && errno == EAGAIN)
			return;
		if (n < 0 && errno == EINTR)
			continue;
		/* EOF (or error): flush a held-back partial sequence. */
		frames_output(r, o, NULL, 0, true);
		loop_del(w);
		close(w->fd);
		w->fd = -1;
		o->eof = true;
		maybe_finish(r);
		return;
	}
}

static const char *verdict_field(struct run *r, const char *key, char *out,
				 size_t outlen)
{
	char pat[64];
	const char *p;

	(void)snprintf(pat, sizeof(pat), "\n%s=", key);
	char tmp[sizeof(r->verdict) + 2];
	tmp[0] = '\n';
	memcpy(tmp + 1, r->verdict, r->verdict_len + 1);
	p = strstr(tmp, pat);
	if (!p)
		return NULL;
	p += strlen(pat);
	size_t n = strcspn(p, "\n");
	if (n >= outlen)
		n = outlen - 1;
	memcpy(out, p, n);
	out[n] = '\0';
	return out;
}

static struct json_object *limits_json(struct run *r)
{
	struct json_object *l = json_object_new_object();
	char txt[32];

	(void)snprintf(txt, sizeof(txt), "%.2f", r->cpu);
	json_object_object_add(l, "cpu", json_object_new_double_s(r->cpu, txt));
	json_object_object_add(l, "memory_mb", json_object_new_int(r->memory_mb));
	json_object_object_add(l, "pids", json_object_new_int(r->pids));
	json_object_object_add(l, "nofile", json_object_new_int(r->nofile));
	json_object_object_add(l, "nproc", json_object_new_int(r->nproc));
	json_object_object_add(l, "startup_timeout_sec",
			       json_object_new_int(r->startup_timeout_sec));
	json_object_object_add(l, "timeout_sec", json_object_new_int(r->timeout_sec));
	return l;
}

static void begin_delete(struct run *r)
{
	bool oom = false;
	char v[256];
	int exit_code = -1;

	r->state = RS_EXITED;
	struct json_object *u = cgroup_usage(r->cid, &oom);
	double wall = r->t_running ? (double)(now_mono_ms() - r->t_running) / 1000.0 : 0;
	char txt[32];
	(void)snprintf(txt, sizeof(txt), "%.3f", wall);
	json_object_object_add(u, "wall_time_sec", json_object_new_double_s(wall, txt));
	json_object_object_add(u, "log_bytes", json_object_new_int64(r->log_bytes));
	/* Every process of the sandbox is gone: the workspace holds still. */
	artifacts_capture(r);
	workspace_return(r);
	json_object_object_add(u, "artifact_bytes", json_object_new_int64(r->artifact_bytes));
	if (r->artifacts_truncated)
		json_object_object_add(u, "artifacts_truncated", json_object_new_boolean(1));
	if (r->truncated)
		json_object_object_add(u, "log_truncated", json_object_new_boolean(1));
	json_object_object_add(u, "limits", limits_json(r));

	if (verdict_field(r, "exitcode", v, sizeof(v)))
		exit_code = atoi(v);
	else if (r->init_exited && WIFEXITED(r->init_status))
		exit_code = WEXITSTATUS(r->init_status);
	else if (r->init_exited && WIFSIGNALED(r->init_status))
		exit_code = 128 + WTERMSIG(r->init_status);

	if (verdict_field(r, "oom", v, sizeof(v)) && strcmp(v, "1") == 0)
		oom = true;
	if (!r->final_phase && verdict_field(r, "status", v, sizeof(v)) &&
	    strcmp(v, "provision_failed") == 0) {
		/* The docker driver could not create, start or follow it. */
		char m[200] = "", msg[256], why[64] = "";
		(void)verdict_field(r, "message", m, sizeof(m));
		(void)verdict_field(r, "reason", why, sizeof(why));
		(void)snprintf(msg, sizeof(msg), "%s", m);
		end_with(r, "failed", strcmp(why, "runtime_lost") == 0 ? "runtime_lost"
								       : "provision_failed", msg);
	}
	if (!r->final_phase) {
		if (verdict_field(r, "status", v, sizeof(v)) && strcmp(v, "exec_failed") == 0) {
			char m[200] = "", msg[256];
			(void)verdict_field(r, "message", m, sizeof(m));
			(void)snprintf(msg, sizeof(msg), "the command could not be executed: %s", m);
			end_with(r, "failed", "exec_failed", msg);
		} else if (oom) {
			end_with(r, "failed", "oom_killed",
				 "the sandbox ran out of memory (resources.memory_mb)");
		} else if (exit_code == 0) {
			end_with(r, "completed", NULL, NULL);
		} else if (verdict_field(r, "status", v, sizeof(v)) && strcmp(v, "signaled") == 0) {
			end_with(r, "failed", "signaled", "the command was killed by a signal");
		} else if (exit_code > 0) {
			end_with(r, "failed", "nonzero_exit", "the command exited non-zero");
		} else {
			end_with(r, "failed", "provision_failed", "the sandbox ended unexpectedly");
		}
	}
	json_object_object_add(r->row, "__exit_code", json_object_new_int(exit_code));
	json_object_object_add(r->row, "__usage", u);
	record_end(r);

	r->state = RS_DELETING;
	r->helper_kind = CHILD_DELETE;
	r->helper = r->docker ? docker_spawn(r, "delete", -1, -1, -1, -1)
			      : oci_spawn(r, "delete", -1, -1, -1, -1);
	if (r->helper < 0)
		run_child_exited(-1, 0);
}

/* The end: the end frame and the terminal row. */
static void record_end(struct run *r)
{
	struct json_object *u = NULL, *ec = NULL;
	char exitbuf[16], logb[24], artb[24];
	const char *rtv = "";
	struct json_object *oci = NULL, *ver = NULL;

	json_object_object_get_ex(r->row, "__usage", &u);
	json_object_object_get_ex(r->row, "__exit_code", &ec);
	int exit_code = ec ? json_object_get_int(ec) : -1;
	(void)snprintf(exitbuf, sizeof(exitbuf), "%d", exit_code);
	(void)snprintf(logb, sizeof(logb), "%lld", (long long)r->log_bytes);
	(void)snprintf(artb, sizeof(artb), "%lld", (long long)r->artifact_bytes);
	if (json_object_object_get_ex(sup->runtimes, r->runtime, &oci) &&
	    json_object_object_get_ex(oci, "version", &ver) && ver)
		rtv = json_object_get_string(ver);

	struct json_object *d = json_object_new_object();
	json_object_object_add(d, "exit_code",
			       exit_code >= 0 ? json_object_new_int(exit_code) : NULL);
	json_object_object_add(d, "phase", json_object_new_string(r->final_phase));
	json_object_object_add(d, "reason_code",
			       r->reason ? json_object_new_string(r->reason) : NULL);
	if (r->message[0])
		json_object_object_add(d, "message", json_object_new_string(r->message));
	stdin_release(r);

	const char *params[] = {
		r->id, r->final_phase, r->reason, r->message[0] ? r->message : NULL,
		exit_code >= 0 ? exitbuf : NULL,
		u ? json_object_to_json_string_ext(u, JSON_C_TO_STRING_PLAIN) : NULL,
		logb, rtv, artb, r->artifacts_truncated ? "true" : "false",
		r->docker && r->docker_image[0] ? r->docker_image : NULL
	};
	PGresult *res = db_exec(
		&sup->db,
		"UPDATE runs SET phase = $2, reason_code = $3, message = $4, "
		"  exit_code = $5::int, resource_usage = $6::jsonb, "
		"  log_bytes = $7::bigint, runtime_version = nullif($8, ''), "
		"  artifact_bytes = $9::bigint, artifacts_truncated = $10::boolean, "
		"  image_digest = coalesce($11, image_digest), "
		"  finished_at = now(), lease_until = NULL "
		"WHERE id = $1",
		11, params);
	if (res)
		PQclear(res);
	else
		log_msg(LOG_LVL_ERROR, run_fields(r), "recording the end of the run: %s",
			sup->db.last_error);
	/* The end frame after the row: whoever sees `end` and asks for the
	 * run finds it terminal. */
	frames_event(r, "end", d);
	r->ended = true;
	char event[48];
	(void)snprintf(event, sizeof(event), "sandbox.run.%s", r->final_phase);
	audit_log(r, event, exit_code >= 0 ? exitbuf : NULL);
}

/* The sandbox is gone: release what is left and free the run. */
static void complete(struct run *r)
{
	char path[700];

	workspace_release(r);
	if (r->docker)
		cgroup_remove(r->cid);
	if (r->session_id[0]) {
		const char *p[] = { r->session_id };
		(void)db_command(&sup->db,
				 "UPDATE sessions SET last_activity_at = now(), expires_at = least("
				 "  now() + make_interval(secs => ttl_sec), max_expires_at) "
				 "WHERE id = $1::uuid AND state = 'ready'",
				 1, p);
	}
	bool session_run = r->session_id[0] != '\0';
	(void)snprintf(path, sizeof(path), "%s/config.json", r->dir);
	(void)unlink(path);
	(void)snprintf(path, sizeof(path), "%s/init.pid", r->dir);
	(void)unlink(path);
	for (struct run **pp = &sup->runs; *pp; pp = &(*pp)->next) {
		if (*pp == r) {
			*pp = r->next;
			break;
		}
	}
	sup->nruns--;
	loop_del(&r->timer_w);
	close(r->timer_w.fd);
	if (r->log_fd >= 0)
		close(r->log_fd);
	json_object_put(r->row);
	free(r);
	/* An ended session waits for its last run before it is freed; the
	 * session's next run may be waiting for this one. */
	if (session_run)
		sessions_sweep(sup);
	/* A slot is free: take more work. */
	if (!sup->stopping)
		queue_claim(sup);
}

static void maybe_finish(struct run *r)
{
	if (r->state >= RS_EXITED || r->helper > 0)
		return;
	/* runsc's status FIFO: once the sandbox is gone (or was never made)
	 * nothing can write to it any more; whatever init wrote is read now,
	 * and the channel ends even if init never opened it. */
	if (r->status_fifo && !r->status_eof && r->status_w.fd >= 0 &&
	    (r->init_exited || r->init_pid <= 0)) {
		on_status(&r->status_w, 0); /* at the end it calls us again */
		return;
	}
	if (!r->out.eof || !r->err.eof || !r->status_eof)
		return;
	/* A created container must have exited; one never created has no
	 * init to wait for. */
	if (r->init_pid > 0 && !r->init_exited)
		return;
	begin_delete(r);
}

static void read_init_pid(struct run *r)
{
	char path[700], buf[32] = "";
	int fd;

	(void)snprintf(path, sizeof(path), "%s/init.pid", r->dir);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		ssize_t n = read(fd, buf, sizeof(buf) - 1);
		if (n > 0)
			buf[n] = '\0';
		close(fd);
	}
	r->init_pid = (pid_t)atoi(buf);
}

static void crun_error(struct run *r, char *out, size_t outlen)
{
	char path[700];
	FILE *f;

	(void)snprintf(path, sizeof(path), "%s/crun.log", r->dir);
	out[0] = '\0';
	f = fopen(path, "re");
	if (!f)
		return;
	char line[512];
	while (fgets(line, sizeof(line), f))
		(void)strlcpy_ok(out, strtrim(line), outlen);
	fclose(f);
}

/* Exits of processes nobody claimed yet. A sandbox's PID 1 can exit
 * before `crun run --detach` has returned and told us its pid; its exit is
 * kept here until then. Bounded: the oldest entries fall out. */
#define ORPHANS 256
static struct { pid_t pid; int status; } orphans[ORPHANS];
static unsigned orphan_next;

static bool orphan_take(pid_t pid, int *status)
{
	for (unsigned i = 0; i < ORPHANS; i++) {
		if (orphans[i].pid == pid && pid > 0) {
			*status = orphans[i].status;
			orphans[i].pid = 0;
			return true;
		}
	}
	return false;
}

void run_child_exited(pid_t pid, int status)
{
	for (struct run *r = sup->runs; r; r = r->next) {
		if (pid == r->init_pid && pid > 0) {
			r->init_exited = true;
			r->init_status = status;
			maybe_finish(r);
			return;
		}
		if (pid != r->helper && !(pid == -1 && r->helper < 0))
			continue;
		enum child_kind kind = r->helper_kind;
		bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0 && pid > 0;
		char msg[256], why[200];
		r->helper = 0;
		r->helper_kind = CHILD_NONE;
		switch (kind) {
		case CHILD_CREATE:
			if (r->docker) {
				/* The driver lives as long as the container. */
				r->init_exited = true;
				r->init_status = status;
				maybe_finish(r);
				break;
			}
			if (ok) {
				read_init_pid(r);
				int st;
				if (orphan_take(r->init_pid, &st)) {
					r->init_exited = true;
					r->init_status = st;
				}
				if (r->final_phase) {
					kill_now(r);
					break;
				}
				if (r->state < RS_STARTING)
					r->state = RS_STARTING;
			} else {
				crun_error(r, why, sizeof(why));
				(void)snprintf(msg, sizeof(msg), "starting the sandbox failed: %s", why);
				end_with(r, "failed", "provision_failed", msg);
				log_msg(LOG_LVL_ERROR, run_fields(r), "%s", msg);
			}
			maybe_finish(r);
			break;
		case CHILD_DELETE:
			if (!ok)
				log_msg(LOG_LVL_WARN, run_fields(r), "crun delete failed");
			complete(r);
			break;
		default:
			break;
		}
		return;
	}
	if (pid > 0) {
		orphans[orphan_next % ORPHANS].pid = pid;
		orphans[orphan_next % ORPHANS].status = status;
		orphan_next++;
	}
}

static int open_pipe(int fds[2])
{
	if (pipe2(fds, O_CLOEXEC) < 0)
		return -1;
	(void)fcntl(fds[0], F_SETFL, O_NONBLOCK);
	return 0;
}

static void watch_fd(struct watch *w, int fd, void (*fn)(struct watch *, uint32_t),
		     void *ctx)
{
	w->fd = fd;
	w->fn = fn;
	w->ctx = ctx;
	(void)loop_add(w, EPOLLIN);
}

void run_begin(struct json_object *row)
{
	struct run *r = xcalloc(1, sizeof(*r));
	char err[1024] = "";
	int po[2] = { -1, -1 }, pe[2] = { -1, -1 }, ps[2] = { -1, -1 };
	unsigned rnd;

	r->row = row;
	(void)strlcpy_ok(r->id, row_str(row, "id"), sizeof(r->id));
	(void)snprintf(r->cid, sizeof(r->cid), "sbx-%s", r->id);
	(void)strlcpy_ok(r->user_id, row_str(row, "user_id"), sizeof(r->user_id));
	(void)strlcpy_ok(r->image, row_str(row, "image"), sizeof(r->image));
	(void)strlcpy_ok(r->base_image, row_str(row, "base_image"), sizeof(r->base_image));
	(void)strlcpy_ok(r->runtime, row_str(row, "runtime"), sizeof(r->runtime));
	r->docker = strcmp(r->runtime, "docker") == 0;
	r->status_fifo = !r->docker && oci_is_runsc();
	if (row_str(row, "session_id") && uuid_valid(row_str(row, "session_id")))
		(void)strlcpy_ok(r->session_id, row_str(row, "session_id"), sizeof(r->session_id));
	struct json_object *cpu = NULL;
	json_object_object_get_ex(row, "cpu", &cpu);
	r->cpu = json_object_get_double(cpu);
	r->memory_mb = row_int(row, "memory_mb", 512);
	r->pids = row_int(row, "pids_limit", 256);
	r->nofile = row_int(row, "nofile", 1024);
	r->nproc = row_int(row, "nproc", 512);
	r->timeout_sec = row_int(row, "timeout_sec", 60);
	r->startup_timeout_sec = row_int(row, "startup_timeout_sec", 20);
	(void)snprintf(r->dir, sizeof(r->dir), "%s/runs/%s", cfg_str(CFG_DATA_ROOT), r->id);
	/* Each run gets its own 65536-uid range on the host (the sandbox's
	 * root maps to its first uid) and a random uid inside it, so two
	 * runs never share a host uid. */
	r->host_base = (uid_t)(0x10000000u + (sup->slot++ % 4096u) * 65536u);
	random_bytes(&rnd, sizeof(rnd));
	r->uid = (uid_t)(1000 + rnd % 59000);
	if (r->docker) {
		r->host_base = 0; /* no user namespace: the run's uid is a host uid */
	} else if (r->status_fifo) {
		/* runsc (gVisor): no user namespace either (its gofer could not reach
		 * the workspace through root's directories); the run's uid is
		 * taken from the same private host range instead. */
		r->uid += r->host_base;
		r->host_base = 0;
	}
	r->log_fd = -1;
	r->stdin_fd = -1;
	r->stdin_w.fd = -1;
	r->out.type = "stdout";
	r->err.type = "stderr";
	r->out.run = r->err.run = r;
	r->out.w.fd = r->err.w.fd = r->status_w.fd = -1;
	r->t_claim = now_mono_ms();
	r->startup_deadline = r->t_claim + (int64_t)r->startup_timeout_sec * 1000;
	r->next = sup->runs;
	sup->runs = r;
	sup->nruns++;
	r->timer_w.fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	r->timer_w.fn = on_timer;
	r->timer_w.ctx = r;
	(void)loop_add(&r->timer_w, EPOLLIN);
	audit_log(r, "sandbox.run.starting", NULL);

	char runs_dir[600];
	(void)snprintf(runs_dir, sizeof(runs_dir), "%s/runs", cfg_str(CFG_DATA_ROOT));
	(void)mkdir(cfg_str(CFG_DATA_ROOT), 0711);
	(void)mkdir(runs_dir, 0711);
	if (mkdir(r->dir, 0750) < 0 && errno != EEXIST) {
		(void)snprintf(err, sizeof(err), "mkdir %s: %s", r->dir, strerror(errno));
		goto fail;
	}
	struct group *g = getgrnam(cfg_str(CFG_API_USER));
	if (g)
		(void)!chown(r->dir, 0, g->gr_gid);
	if (frames_open(r) < 0) {
		(void)snprintf(err, sizeof(err), "frames log: %s", strerror(errno));
		goto fail;
	}
	struct json_object *d = json_object_new_object();
	json_object_object_add(d, "phase", json_object_new_string("starting"));
	frames_event(r, "phase", d);
	if (workspace_create(r, err, sizeof(err)) < 0 ||
	    (r->docker ? docker_prepare(r, err, sizeof(err)) : oci_write_bundle(r, err, sizeof(err))) < 0)
		goto fail;
	if (open_pipe(po) < 0 || open_pipe(pe) < 0 ||
	    (r->status_fifo ? (ps[0] = oci_status_fifo(r)) : open_pipe(ps)) < 0) {
		(void)snprintf(err, sizeof(err), "pipes: %s", strerror(errno));
		goto fail;
	}
	r->helper_kind = CHILD_CREATE;
	int stdin_rd = stdin_setup(r);
	r->helper = r->docker ? docker_spawn(r, "run", stdin_rd, po[1], pe[1], ps[1])
			      : oci_spawn(r, "run", stdin_rd, po[1], pe[1], ps[1]);
	if (stdin_rd >= 0)
		close(stdin_rd);
	close(po[1]);
	close(pe[1]);
	if (ps[1] >= 0)
		close(ps[1]);
	if (r->helper < 0) {
		close(po[0]);
		close(pe[0]);
		close(ps[0]);
		(void)snprintf(err, sizeof(err), "fork: %s", strerror(errno));
		goto fail;
	}
	watch_fd(&r->out.w, po[0], on_output, &r->out);
	watch_fd(&r->err.w, pe[0], on_output, &r->err);
	watch_fd(&r->status_w, ps[0], on_status, r);
	r->state = RS_CREATING;
	arm_timer(r);
	return;
fail:
	log_msg(LOG_LVL_ERROR, run_fields(r), "provisioning failed: %s", err);
	end_with(r, "failed", "provision_failed", err);
	r->out.eof = r->err.eof = r->status_eof = true;
	r->helper = 0;
	maybe_finish(r);
}
