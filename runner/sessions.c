/* sessions.c: the supervisor's side of sessions. A session's workspace is
 * a tmpfs of SANDBOX_WORKSPACE_CAP_MB mounted at
 * DATA_ROOT/sessions/<id> (noexec,nosuid,nodev), owned by the api's user;
 * its `workspace/` is what runs see at /workspace and `.staging/` is where
 * the api stages uploads (same filesystem: a move is a rename, the cap
 * covers both).
 *
 *   provisioning --(claimed here, mounted)--> ready --> expired | deleted
 *   a session nobody could mount ends `failed`.
 *
 * Ended sessions of this node: their queued runs end `killed`, their
 * running runs are killed, then the workspace is unmounted and removed
 * (`workspace_freed_at`). Expiry (TTL after the last activity, bounded by
 * SANDBOX_SESSION_MAX_LIFETIME) is checked every SANDBOX_SESSION_SWEEP_SEC
 * (at most 30 s). */
#include "supervisor.h"
#include "../lib/config.h"
#include "../lib/crypto.h"
#include "../lib/log.h"
#include "../lib/util.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

void session_dir(const char *id, char *out, size_t outlen)
{
	(void)snprintf(out, outlen, "%s/sessions/%s", cfg_str(CFG_DATA_ROOT), id);
}

static bool is_mountpoint(const char *path)
{
	struct stat a, b;
	char parent[700];

	(void)snprintf(parent, sizeof(parent), "%s/..", path);
	return stat(path, &a) == 0 && stat(parent, &b) == 0 && a.st_dev != b.st_dev;
}

/* Unmount and remove a session's directory (confined to DATA_ROOT/sessions:
 * the id is a uuid from our own table). */
static void free_dir(const char *id)
{
	char dir[700];

	if (!uuid_valid(id))
		return;
	session_dir(id, dir, sizeof(dir));
	if (umount2(dir, MNT_DETACH) < 0 && errno != EINVAL && errno != ENOENT)
		log_warn("umount %s: %s", dir, strerror(errno));
	if (rmdir(dir) < 0 && errno != ENOENT)
		log_warn("rmdir %s: %s", dir, strerror(errno));
}

static int mount_workspace(const char *id, char *err, size_t errlen)
{
	char dir[700], ws[720], opts[128], base[600];
	uid_t u;
	gid_t g;

	api_ids(&u, &g);
	(void)snprintf(base, sizeof(base), "%s/sessions", cfg_str(CFG_DATA_ROOT));
	(void)mkdir(cfg_str(CFG_DATA_ROOT), 0711);
	(void)mkdir(base, 0711);
	session_dir(id, dir, sizeof(dir));
	if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
		(void)snprintf(err, errlen, "mkdir: %s", strerror(errno));
		return -1;
	}
	(void)snprintf(opts, sizeof(opts), "size=%lldm,mode=0700,uid=%u,gid=%u",
		       (long long)cfg_int(CFG_WORKSPACE_CAP_MB), (unsigned)u, (unsigned)g);
	if (!is_mountpoint(dir) &&
	    mount("sandbox-session", dir, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, opts) < 0) {
		(void)snprintf(err, errlen, "mount: %s", strerror(errno));
		(void)rmdir(dir);
		return -1;
	}
	(void)snprintf(ws, sizeof(ws), "%s/workspace", dir);
	if ((mkdir(ws, 0755) < 0 && errno != EEXIST) || chown(ws, u, g) < 0) {
		(void)snprintf(err, errlen, "workspace: %s", strerror(errno));
		free_dir(id);
		return -1;
	}
	return 0;
}

void sessions_provision(struct supervisor *s)
{
	if (s->stopping)
		return;
	const char *p[] = { s->node_id };
	PGresult *r = db_exec(
		&s->db,
		"UPDATE sessions SET node_id = $1 WHERE id IN ("
		"  SELECT id FROM sessions WHERE state = 'provisioning' AND node_id IS NULL"
		"  ORDER BY created_at LIMIT 32 FOR UPDATE SKIP LOCKED) RETURNING id",
		1, p);
	if (!r)
		return;
	for (int i = 0; i < PQntuples(r); i++) {
		const char *id = PQgetvalue(r, i, 0);
		char err[256] = "";
		const char *q[] = { id, err };
		if (mount_workspace(id, err, sizeof(err)) < 0) {
			log_msg(LOG_LVL_ERROR, log_fields("session_id", id, NULL),
				"session workspace: %s", err);
			(void)db_command(&s->db,
					 "UPDATE sessions SET state = 'failed', reason = $2, ended_at = now(),"
					 "  workspace_freed_at = now() WHERE id = $1::uuid",
					 2, q);
			continue;
		}
		PGresult *ok = db_exec(&s->db,
				       "UPDATE sessions SET state = 'ready' WHERE id = $1::uuid"
				       " AND state = 'provisioning' RETURNING id",
				       1, q);
		if (ok && PQntuples(ok) == 1) {
			log_msg(LOG_LVL_INFO, log_fields("session_id", id, NULL),
				"session workspace ready");
		} else if (ok) {
			/* The api gave up waiting meanwhile: nothing is left half-made. */
			free_dir(id);
			(void)db_command(&s->db,
					 "UPDATE sessions SET workspace_freed_at = now() WHERE id = $1::uuid",
					 1, q);
		}
		if (ok)
			PQclear(ok);
	}
	PQclear(r);
}

/* End the runs of the ended session `id` and free its workspace once no
 * run of this node uses it. */
static void finish_session(struct supervisor *s, const char *id, const char *state)
{
	char reason[32], msg[96];

	(void)snprintf(reason, sizeof(reason), "session_%s", state);
	(void)snprintf(msg, sizeof(msg), "the session was %s", state);
	const char *p[] = { id, reason, msg };
	PGresult *q = db_exec(&s->db,
			      "UPDATE runs SET phase = 'killed', reason_code = $2, message = $3,"
			      "  finished_at = now() WHERE session_id = $1::uuid AND phase = 'queued'"
			      " RETURNING id",
			      3, p);
	if (q) {
		for (int i = 0; i < PQntuples(q); i++)
			frames_append_end(PQgetvalue(q, i, 0), "killed", reason, msg);
		PQclear(q);
	}
	if (runs_kill_session(id, reason, msg) > 0)
		return; /* freed when its last run is gone (complete → sweep) */
	free_dir(id);
	(void)db_command(&s->db,
			 "UPDATE sessions SET workspace_freed_at = now() WHERE id = $1::uuid", 1, p);
	log_msg(LOG_LVL_INFO, log_fields("session_id", id, "state", state, NULL),
		"session workspace freed");
}

void sessions_sweep(struct supervisor *s)
{
	const char *p[] = { s->node_id };

	/* Expired: idle past its TTL (a session with an active run is not
	 * idle), or past SANDBOX_SESSION_MAX_LIFETIME whatever it does. */
	PGresult *r = db_exec(
		&s->db,
		"UPDATE sessions SET state = 'expired', ended_at = now(),"
		"  reason = CASE WHEN max_expires_at <= now() THEN 'max_lifetime' ELSE 'ttl' END "
		"WHERE node_id = $1 AND state = 'ready' AND (max_expires_at <= now() OR"
		"  (expires_at <= now() AND NOT EXISTS (SELECT 1 FROM runs WHERE"
		"   session_id = sessions.id AND phase IN ('starting', 'running')))) RETURNING id",
		1, p);
	if (r) {
		for (int i = 0; i < PQntuples(r); i++)
			log_msg(LOG_LVL_INFO, log_fields("session_id", PQgetvalue(r, i, 0), NULL),
				"session expired");
		PQclear(r);
	}
	r = db_exec(&s->db,
		    "SELECT id, state FROM sessions WHERE node_id = $1"
		    " AND state IN ('expired', 'deleted', 'failed') AND workspace_freed_at IS NULL",
		    1, p);
	if (!r)
		return;
	for (int i = 0; i < PQntuples(r); i++)
		finish_session(s, PQgetvalue(r, i, 0), PQgetvalue(r, i, 1));
	PQclear(r);
}

void sessions_tick(struct supervisor *s)
{
	static int64_t last;

	if (last && now_mono_ms() - last < cfg_int(CFG_SESSION_SWEEP_SEC) * 1000)
		return;
	last = now_mono_ms();
	sessions_provision(s);
	sessions_sweep(s);
}

/* After a restart: a ready session of this node whose tmpfs is gone (the
 * host rebooted) cannot be resumed; a half-provisioned one is dropped; a
 * mount below DATA_ROOT/sessions that no live session owns is removed. */
void sessions_recover(struct supervisor *s)
{
	const char *p[] = { s->node_id };
	PGresult *r = db_exec(&s->db,
			      "SELECT id, state FROM sessions WHERE node_id = $1"
			      " AND state IN ('provisioning', 'ready')",
			      1, p);
	if (!r)
		return;
	for (int i = 0; i < PQntuples(r); i++) {
		char dir[700];
		const char *id = PQgetvalue(r, i, 0);
		const char *q[] = { id };
		session_dir(id, dir, sizeof(dir));
		if (strcmp(PQgetvalue(r, i, 1), "ready") == 0 && is_mountpoint(dir))
			continue;
		(void)db_command(&s->db,
				 "UPDATE sessions SET state = 'failed', ended_at = now(),"
				 "  reason = 'the workspace was lost when the node restarted' "
				 "WHERE id = $1::uuid",
				 1, q);
	}
	PQclear(r);

	char prefix[600], line[4096];
	FILE *f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return;
	(void)snprintf(prefix, sizeof(prefix), "%s/sessions/", cfg_str(CFG_DATA_ROOT));
	while (fgets(line, sizeof(line), f)) {
		char mnt[2048];
		if (sscanf(line, "%*s %*s %*s %*s %2047s", mnt) != 1 ||
		    strncmp(mnt, prefix, strlen(prefix)) != 0)
			continue;
		const char *id = mnt + strlen(prefix);
		if (!uuid_valid(id))
			continue;
		const char *q[] = { id, s->node_id };
		PGresult *x = db_exec(&s->db,
				      "SELECT 1 FROM sessions WHERE id = $1::uuid AND node_id = $2"
				      " AND state = 'ready'",
				      2, q);
		if (x && PQntuples(x) == 0) {
			free_dir(id);
			(void)db_command(&s->db,
					 "UPDATE sessions SET workspace_freed_at = now()"
					 " WHERE id = $1::uuid AND workspace_freed_at IS NULL",
					 1, q);
			log_msg(LOG_LVL_INFO, log_fields("session_id", id, NULL),
				"recovery: freed the workspace of an ended session");
		}
		if (x)
			PQclear(x);
	}
	fclose(f);
}
