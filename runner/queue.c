/* queue.c: the runs table is the queue. An AFTER INSERT trigger NOTIFYs
 * `sandbox_runs`; the supervisor LISTENs on its own connection, claims
 * queued runs with FOR UPDATE SKIP LOCKED (so several supervisors never
 * claim the same run), up to SANDBOX_MAX_CONCURRENT_RUNS at once and
 * SANDBOX_USER_MAX_CONCURRENT_RUNS per user (one user cannot starve the
 * others), holds a lease on what it runs and renews it every tick. Queued
 * runs older than SANDBOX_QUEUE_TTL_SEC end `failed`/queue_ttl_expired.
 * A tick also claims, in case a notification was missed. */
#include "supervisor.h"
#include "../lib/config.h"
#include "../lib/log.h"
#include "../lib/util.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>

static bool recovered;
static int listen_fd = -1;

static void drain_notifies(struct supervisor *s)
{
	PGnotify *n;
	bool claim = false, sessions = false;

	if (!s->db.conn)
		return;
	while ((n = PQnotifies(s->db.conn)) != NULL) {
		if (strcmp(n->relname, "sandbox_runs") == 0)
			claim = true;
		else if (strcmp(n->relname, "sandbox_cancel") == 0)
			run_cancel(n->extra);
		else if (strcmp(n->relname, "sandbox_sessions") == 0)
			sessions = true;
		PQfreemem(n);
	}
	if (sessions && recovered) {
		sessions_provision(s);
		sessions_sweep(s);
	}
	if (claim)
		queue_claim(s);
}

static void on_db(struct watch *w, uint32_t ev)
{
	(void)ev;
	if (!sup->db.conn || PQconsumeInput(sup->db.conn) == 0) {
		/* The connection broke; the next tick reconnects and LISTENs. */
		loop_del(w);
		listen_fd = -1;
		sup->listening = false;
		return;
	}
	drain_notifies(sup);
}

int queue_listen(struct supervisor *s)
{
	PGresult *r;

	if (s->listening && s->db.conn && PQstatus(s->db.conn) == CONNECTION_OK &&
	    PQsocket(s->db.conn) == listen_fd)
		return 0;
	if (listen_fd >= 0) {
		loop_del(&s->db_w);
		listen_fd = -1;
	}
	s->listening = false;
	r = db_exec(&s->db, "LISTEN sandbox_runs", 0, NULL);
	if (!r)
		return -1;
	PQclear(r);
	r = db_exec(&s->db, "LISTEN sandbox_cancel", 0, NULL);
	if (!r)
		return -1;
	PQclear(r);
	r = db_exec(&s->db, "LISTEN sandbox_sessions", 0, NULL);
	if (!r)
		return -1;
	PQclear(r);
	listen_fd = PQsocket(s->db.conn);
	s->db_w.fd = listen_fd;
	s->db_w.fn = on_db;
	s->db_w.ctx = s;
	if (loop_add(&s->db_w, EPOLLIN) < 0)
		return -1;
	s->listening = true;
	return 0;
}

/* Runtimes this node can run now, as a PostgreSQL array literal. */
static void available_runtimes(struct supervisor *s, char *out, size_t outlen)
{
	size_t used = 0;

	out[0] = '{';
	used = 1;
	json_object_object_foreach(s->runtimes, name, info)
	{
		struct json_object *av = NULL;
		if (json_object_object_get_ex(info, "available", &av) &&
		    json_object_get_boolean(av) && used + strlen(name) + 2 < outlen) {
			used += (size_t)snprintf(out + used, outlen - used, "%s%s",
						 used > 1 ? "," : "", name);
		}
	}
	(void)snprintf(out + used, outlen - used, "}");
}

void queue_claim(struct supervisor *s)
{
	char node_slots[16], user_cap[16], rts[128];
	int slots = (int)cfg_int(CFG_MAX_CONCURRENT_RUNS) - s->nruns;

	if (slots <= 0 || s->stopping || !recovered)
		return;
	available_runtimes(s, rts, sizeof(rts));
	if (strcmp(rts, "{}") == 0)
		return;
	(void)snprintf(node_slots, sizeof(node_slots), "%d", slots);
	(void)snprintf(user_cap, sizeof(user_cap), "%lld",
		       (long long)cfg_int(CFG_USER_MAX_CONCURRENT_RUNS));
	const char *p[] = { s->node_id, node_slots, rts, user_cap };
	PGresult *r = db_exec(
		&s->db,
		"WITH active AS ("
		"  SELECT user_id, count(*) AS n FROM runs"
		"  WHERE phase IN ('starting', 'running') GROUP BY user_id),"
		" cand AS ("
		"  SELECT q.id, q.created_at, row_number() OVER ("
		"    PARTITION BY q.user_id ORDER BY q.created_at) + coalesce(a.n, 0) AS k"
		"  FROM runs q LEFT JOIN active a ON a.user_id = q.user_id"
		"  WHERE q.phase = 'queued' AND q.runtime = ANY($3::text[])"
		/* A session's runs go to the node holding its workspace, one at
		 * a time, oldest first. */
		"  AND (q.session_id IS NULL OR ("
		"   EXISTS (SELECT 1 FROM sessions x WHERE x.id = q.session_id"
		"     AND x.node_id = $1 AND x.state = 'ready')"
		"   AND NOT EXISTS (SELECT 1 FROM runs b WHERE b.session_id = q.session_id"
		"     AND b.phase IN ('starting', 'running'))"
		"   AND NOT EXISTS (SELECT 1 FROM runs o WHERE o.session_id = q.session_id"
		"     AND o.phase = 'queued' AND o.created_at < q.created_at)))),"
		" pick AS ("
		"  SELECT id FROM runs WHERE phase = 'queued' AND id IN ("
		"    SELECT id FROM cand WHERE k <= $4::int ORDER BY created_at LIMIT $2::int)"
		"  ORDER BY created_at FOR UPDATE SKIP LOCKED) "
		"UPDATE runs r SET phase = 'starting', node_id = $1, started_at = now(),"
		"  lease_until = now() + interval '60 seconds', attempt = r.attempt + 1 "
		"FROM pick WHERE r.id = pick.id "
		"RETURNING row_to_json(r.*)::text",
		4, p);
	if (!r) {
		log_msg(LOG_LVL_WARN, log_fields("db_error", s->db.last_error, NULL),
			"claiming runs failed");
		return;
	}
	for (int i = 0; i < PQntuples(r); i++) {
		struct json_object *row = json_tokener_parse(PQgetvalue(r, i, 0));
		if (row)
			run_begin(row);
	}
	PQclear(r);
}

/* End runs no sandbox of this process holds: `sql` sets phase `failed`
 * with `reason` and returns their ids; each gets its end frame. Returns
 * how many, or -1. */
static int end_runs(struct supervisor *s, const char *sql, int n, const char *const *p,
		    const char *reason, const char *message)
{
	PGresult *r = db_exec(&s->db, sql, n, p);
	if (!r)
		return -1;
	int count = PQntuples(r);
	for (int i = 0; i < count; i++)
		frames_append_end(PQgetvalue(r, i, 0), "failed", reason, message);
	PQclear(r);
	return count;
}

static void recover(struct supervisor *s)
{
	const char *p[] = { s->node_id };
	PGresult *r;

	/* Never began executing: run it again, at most three attempts. */
	r = db_exec(&s->db,
		    "UPDATE runs SET phase = 'queued', node_id = NULL, started_at = NULL,"
		    "  lease_until = NULL "
		    "WHERE node_id = $1 AND phase = 'starting' AND running_at IS NULL"
		    "  AND attempt < 3 RETURNING id",
		    1, p);
	if (!r)
		return;
	if (PQntuples(r))
		log_info("recovery: re-queued %d run(s) that had not started", PQntuples(r));
	PQclear(r);
	/* Began executing (or out of attempts): its sandbox is gone, so the
	 * run ends; running it again could repeat its effects. */
	int n = end_runs(s,
			 "UPDATE runs SET phase = 'failed', reason_code = 'supervisor_restart',"
			 "  message = 'the supervisor restarted while the run was in flight',"
			 "  finished_at = now(), lease_until = NULL "
			 "WHERE node_id = $1 AND phase IN ('starting', 'running') RETURNING id",
			 1, p, "supervisor_restart",
			 "the supervisor restarted while the run was in flight");
	if (n < 0)
		return;
	if (n > 0)
		log_info("recovery: %d run(s) ended with supervisor_restart", n);
	recovered = true;
}

void queue_recover(struct supervisor *s)
{
	oci_cleanup_leftovers(s);
	if (runtime_available(s, "docker"))
		docker_reconcile(s);
	workspace_cleanup_leftovers();
	recover(s);
	sessions_recover(s);
}

void queue_tick(struct supervisor *s)
{
	char ttl[16];
	const char *p1[] = { s->node_id };

	if (!recovered)
		recover(s);
	if (queue_listen(s) < 0)
		return;
	(void)db_command(&s->db,
			 "UPDATE runs SET lease_until = now() + interval '60 seconds' "
			 "WHERE node_id = $1 AND phase IN ('starting', 'running')",
			 1, p1);
	(void)snprintf(ttl, sizeof(ttl), "%lld", (long long)cfg_int(CFG_QUEUE_TTL_SEC));
	const char *p2[] = { ttl };
	(void)end_runs(s,
		       "UPDATE runs SET phase = 'failed', reason_code = 'queue_ttl_expired',"
		       "  message = 'the run waited in the queue longer than queue_ttl_sec',"
		       "  finished_at = now() "
		       "WHERE phase = 'queued' AND created_at < now() - make_interval(secs => $1::int) "
		       "RETURNING id",
		       1, p2, "queue_ttl_expired",
		       "the run waited in the queue longer than queue_ttl_sec");
	/* Runs whose supervisor died (lease long expired) end here. */
	(void)end_runs(s,
		       "UPDATE runs SET phase = 'failed', reason_code = 'supervisor_restart',"
		       "  message = 'the supervisor running it stopped answering',"
		       "  finished_at = now(), lease_until = NULL "
		       "WHERE phase IN ('starting', 'running') AND node_id <> $1"
		       "  AND lease_until < now() - interval '60 seconds' RETURNING id",
		       1, p1, "supervisor_restart", "the supervisor running it stopped answering");
	sessions_tick(s);
	reaper_tick(s);
	queue_claim(s);
}

void queue_poll(struct supervisor *s)
{
	drain_notifies(s);
}
