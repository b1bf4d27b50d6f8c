/* supervisor.h: state shared by the files of sandbox-supervisor. */
#ifndef SANDBOX_SUPERVISOR_H
#define SANDBOX_SUPERVISOR_H

#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "../lib/db.h"

/* One fd in the event loop and what to do when it is ready. */
struct watch {
	int fd;
	void (*fn)(struct watch *w, uint32_t events);
	void *ctx;
};

int loop_add(struct watch *w, uint32_t events);
int loop_mod(struct watch *w, uint32_t events);
void loop_del(struct watch *w);

/* A run's lifecycle inside this supervisor (the database phase follows
 * it: CREATING/STARTING are `starting`, RUNNING and STOPPING `running`). */
enum run_state {
	RS_CREATING, /* crun run --detach in progress */
	RS_STARTING, /* waiting for init's "started" */
	RS_RUNNING,  /* the command runs */
	RS_EXITED,   /* init exited; draining output */
	RS_DELETING, /* crun delete in progress */
};

/* What a child process of the supervisor is, for SIGCHLD dispatch. */
enum child_kind { CHILD_NONE, CHILD_CREATE, CHILD_DELETE };

struct run;
struct output {
	struct watch w;
	struct run *run;
	const char *type; /* "stdout" / "stderr" */
	unsigned char carry[4]; /* an incomplete UTF-8 sequence held back */
	size_t ncarry;
	bool eof;
};

struct run {
	char id[37];
	char cid[48]; /* container id */
	char user_id[65];
	char image[65];
	char base_image[256];
	char dir[512]; /* DATA_ROOT/runs/<id> */
	char session_id[37]; /* "" for a one-shot run */
	char runtime[16];    /* "oci" or "docker" */
	bool docker;
	char docker_image[80]; /* the image's id in dockerd */
	char ws[600];        /* the host directory mounted at /workspace */
	int64_t artifact_bytes;
	bool artifacts_truncated;
	struct json_object *row; /* the claimed row, as JSON */
	double cpu;
	int memory_mb, pids, nofile, nproc, timeout_sec, startup_timeout_sec;
	uid_t uid;      /* inside the sandbox */
	uid_t host_base; /* host uid of the sandbox's uid 0 */

	enum run_state state;
	pid_t helper; /* crun create/start/delete in progress */
	enum child_kind helper_kind;
	pid_t init_pid;
	int init_status;
	bool init_exited;

	struct output out, err;
	struct watch status_w;
	char verdict[2048];
	size_t verdict_len;
	bool status_eof;
	bool status_fifo; /* runsc (gVisor): the status channel is a FIFO, not a pipe */

	struct watch timer_w;
	int64_t startup_deadline, exec_deadline, kill_deadline; /* mono ms */
	int64_t t_claim, t_running;

	/* How it ends, decided by the first cause. */
	const char *final_phase;
	const char *reason;
	char message[256];
	bool cancel;

	/* Interactive runs (stdin.c). */
	bool interactive;
	int stdin_fd; /* write end; -1 when closed */
	struct watch stdin_w;
	unsigned char *stdin_buf;
	size_t stdin_len;
	bool stdin_closing;
	int64_t stdin_total, stdin_window_start, stdin_window_bytes, stdin_last;
	int64_t stdin_max_bytes, stdin_max_frame, stdin_bps, stdin_idle_ms;

	int log_fd;
	bool ended;             /* the end frame is written */
	int64_t last_heartbeat; /* mono ms */
	int64_t seq;
	int64_t log_bytes;
	bool truncated;

	struct run *next;
};

struct supervisor {
	struct db db;
	char node_id[128];
	char hostname[128];
	struct json_object *runtimes; /* last probe result */
	int64_t last_probe_ms;
	bool registered; /* a heartbeat has reached the database */
	bool listening;  /* LISTEN is active on db */
	struct watch db_w;
	struct run *runs;
	int nruns;
	unsigned slot; /* rotating uid-range slot */
	bool stopping;
	char state_root[512]; /* crun --root */
};

extern struct supervisor *sup;

/* main.c: what the last probe found. */
bool runtime_available(struct supervisor *s, const char *name);

/* hostprep.c: make the host able to run containers (cgroup layout). */
int hostprep_cgroups(void);

/* probe.c: what each runtime can do here, as reported in `nodes`. */
struct json_object *probe_runtimes(void);
int run_capture(char *const argv[], int timeout_ms, char *out, size_t outlen);

/* node.c: the supervisor's row in `nodes`; the image catalog. */
int node_heartbeat(struct supervisor *s);
void node_retire(struct supervisor *s);
void images_register(struct supervisor *s);

/* queue.c: LISTEN/NOTIFY, claiming, leases, queue TTL, recovery. */
int queue_listen(struct supervisor *s);
void queue_claim(struct supervisor *s);
void queue_tick(struct supervisor *s);
void queue_recover(struct supervisor *s);
void queue_poll(struct supervisor *s); /* notifications read by other queries */

/* lifecycle.c: the run state machine. */
/* The run `id` (its first 36 characters) if this supervisor holds it,
 * whatever its state; NULL otherwise. */
struct run *run_local(const char *id);
/* Log fields of every line about a run: run_id, user_id, the request_id
 * of the POST that created it, session_id. */
struct json_object *run_fields(const struct run *r);
/* The first cause decides how a run ends (phase, reason_code, message);
 * later ones are ignored. */
void end_with(struct run *r, const char *phase, const char *reason, const char *message);
/* Kill the sandbox now (the runtime's way); re-arm the run's timer. */
void kill_now(struct run *r);
void arm_timer(struct run *r);
void run_begin(struct json_object *row);
void run_child_exited(pid_t pid, int status);
void run_cancel(const char *run_id);
void runs_shutdown(void);

/* frames.c: the run's recorded stream (frames.jsonl). */
int frames_open(struct run *r);
void frames_event(struct run *r, const char *event, struct json_object *data);
void frames_output(struct run *r, struct output *o, const unsigned char *buf,
		   size_t len, bool final);
/* An end frame for a run no sandbox of this process holds (queue TTL,
 * recovery), appended after whatever frames the run already has. */
void frames_append_end(const char *run_id, const char *phase, const char *reason,
		       const char *message);

/* sandbox_args.c: sandbox-init's arguments + the command, and the
 * environment, for every runtime. */
void sandbox_init_args(struct json_object *a, const struct run *r, bool status_file);
struct json_object *sandbox_env(const struct run *r);

/* runtime_oci.c: bundles and crun invocations. */
int oci_write_bundle(struct run *r, char *err, size_t errlen);
pid_t oci_spawn(struct run *r, const char *verb, int in_fd, int out_fd, int err_fd,
		int status_fd);
void oci_cleanup_leftovers(struct supervisor *s);
bool oci_is_runsc(void);
int oci_status_fifo(struct run *r);
void oci_term(struct run *r);

/* runtime_docker.c: the docker runtime (Engine API over its socket). */
int docker_version(char *out, size_t outlen, char *err, size_t errlen);
int docker_image(const char *name, const char *digest, const char *tarball, char *id_out,
		 size_t idlen);
int docker_prepare(struct run *r, char *err, size_t errlen);
void docker_images_forget(void);
pid_t docker_spawn(struct run *r, const char *verb, int in_fd, int out_fd, int err_fd,
		   int status_fd);
void docker_reconcile(struct supervisor *s);
/* node.c: the catalog's images imported into dockerd (once each). */
void images_docker_import(struct supervisor *s);
/* cgroup.c: remove the (empty) cgroups of a finished sandbox. */
void cgroup_remove(const char *cid);

/* workspace.c: the run's /workspace (a tmpfs with a size cap: the run's
 * own, or its session's). */
int workspace_create(struct run *r, char *err, size_t errlen);
/* A session's workspace back to the api's user: before the run's end is
 * recorded, so whoever sees the end finds the files theirs. */
void workspace_return(struct run *r);
/* A one-shot run's workspace unmounted. */
void workspace_release(struct run *r);
void workspace_cleanup_leftovers(void);
/* Give a tree to uid:gid (never through a symlink), setuid bits off. */
int workspace_chown(const char *dir, uid_t uid, gid_t gid);
/* The api's user, which owns session workspaces between runs. */
void api_ids(uid_t *uid, gid_t *gid);

/* sessions.c: session workspaces on this node. */
void sessions_provision(struct supervisor *s);
void sessions_sweep(struct supervisor *s);
void sessions_tick(struct supervisor *s);
void sessions_recover(struct supervisor *s);
void session_dir(const char *id, char *out, size_t outlen);

/* artifacts.c: capture_patterns → the run's artifacts directory. */
void artifacts_capture(struct run *r);
/* Glob match of a workspace-relative path ("**" crosses '/', "*" not). */
bool artifact_glob(const char *pattern, const char *path);

/* reaper.c: TTLs and orphans (artifacts, idempotency keys, audit rows). */
void reaper_tick(struct supervisor *s);

/* lifecycle.c: end this node's runs of an ended session; how many are
 * still alive. */
int runs_kill_session(const char *session_id, const char *reason, const char *message);

/* cgroup.c: resource usage measured by the kernel. */
struct json_object *cgroup_usage(const char *cid, bool *oom_killed);

/* frames.c: a heartbeat frame of an active run. */
void frames_heartbeat(struct run *r);

/* streams.c: the WebSocket hub. */
struct stream_counters {
	uint64_t opened, disconnects, heartbeats, drops;
};
int streams_listen(void);
void streams_publish(const char *run_id, const char *line, size_t len, int64_t seq,
		     bool end);
void streams_tick(void);
const struct stream_counters *streams_counters(void);
int streams_clients(void);

/* stdin.c: interactive runs. */
int stdin_setup(struct run *r); /* the read end for the sandbox, or -1 */
void run_stdin_data(const char *run_id, const unsigned char *data, size_t len);
void run_stdin_close(const char *run_id);
void stdin_tick(struct run *r, int64_t now);
void stdin_release(struct run *r);

/* seccomp.c */
struct json_object *seccomp_profile(void);

#endif
