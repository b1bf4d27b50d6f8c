/* reaper.c: what has outlived its time, every SANDBOX_REAPER_INTERVAL_SEC
 * (default 15 min; session expiry has its own, faster sweep in
 * sessions.c).
 *
 * Node-local (each supervisor, for what it holds on disk):
 *   - artifacts of runs finished more than SANDBOX_ARTIFACT_TTL_HOURS ago:
 *     the files are removed, the run says `artifacts_expired_at`;
 *   - orphaned directories below DATA_ROOT/runs and DATA_ROOT/sessions (no
 *     row, or an ended session whose workspace is not mounted);
 *   - containers in the OCI state root, sandbox cgroups and workspace
 *     mounts that no run of this supervisor accounts for.
 * Database-wide, by one supervisor at a time (pg_try_advisory_lock):
 *   - idempotency keys past SANDBOX_IDEMPOTENCY_TTL_SEC;
 *   - audit rows past SANDBOX_AUDIT_RETENTION_DAYS (the only deletes the
 *     audit table accepts).
 * Every delete is confined to DATA_ROOT: names are checked to be uuids and
 * removed through directory fds, never following a symlink. */
#include "supervisor.h"
#include "../lib/config.h"
#include "../lib/crypto.h"
#include "../lib/log.h"
#include "../lib/util.h"
#include "../lib/wspath.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define REAPER_LOCK "hashtext('sandbox.reaper')"

static int open_root(const char *sub)
{
	char path[600];

	(void)snprintf(path, sizeof(path), "%s/%s", cfg_str(CFG_DATA_ROOT), sub);
	return open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

static void expire_artifacts(struct supervisor *s)
{
	char hours[16];
	const char *p[] = { s->node_id, hours };

	(void)snprintf(hours, sizeof(hours), "%lld", (long long)cfg_int(CFG_ARTIFACT_TTL_HOURS));
	PGresult *r = db_exec(
		&s->db,
		"UPDATE runs SET artifacts_expired_at = now() WHERE node_id = $1"
		" AND artifacts_expired_at IS NULL AND finished_at IS NOT NULL"
		" AND finished_at < now() - make_interval(hours => $2::int)"
		" AND (artifact_bytes > 0 OR artifacts_truncated"
		"      OR EXISTS (SELECT 1 FROM artifacts a WHERE a.run_id = runs.id)) RETURNING id",
		2, p);
	if (!r)
		return;
	int runs = open_root("runs");
	for (int i = 0; runs >= 0 && i < PQntuples(r); i++) {
		const char *id = PQgetvalue(r, i, 0);
		if (!uuid_valid(id))
			continue;
		int d = wspath_open(runs, id, O_RDONLY | O_DIRECTORY, 0);
		if (d < 0)
			continue;
		if (wspath_remove_tree(d, "artifacts") < 0 && errno != ENOENT)
			log_warn("reaper: artifacts of %s: %s", id, strerror(errno));
		close(d);
	}
	if (PQntuples(r))
		log_msg(LOG_LVL_INFO, NULL, "reaper: expired the artifacts of %d run(s)", PQntuples(r));
	if (runs >= 0)
		close(runs);
	PQclear(r);
}

/* Directories below DATA_ROOT/<sub> named like a uuid whose row says they
 * should not exist (`sql` returns a row when the directory must stay). */
static void orphans(struct supervisor *s, const char *sub, const char *sql)
{
	int root = open_root(sub);
	DIR *d = root >= 0 ? fdopendir(root) : NULL;
	struct dirent *de;
	int removed = 0;

	if (!d) {
		if (root >= 0)
			close(root);
		return;
	}
	while ((de = readdir(d)) != NULL) {
		struct stat st, top;
		if (!uuid_valid(de->d_name) ||
		    fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !S_ISDIR(st.st_mode) || fstat(dirfd(d), &top) < 0 || st.st_dev != top.st_dev)
			continue; /* a live mount is sessions.c's to free */
		if (run_local(de->d_name))
			continue;
		const char *p[] = { de->d_name, s->node_id };
		PGresult *res = db_exec(&s->db, sql, 2, p);
		if (!res)
			break;
		bool keep = PQntuples(res) > 0;
		PQclear(res);
		if (keep)
			continue;
		if (wspath_remove_tree(dirfd(d), de->d_name) == 0)
			removed++;
	}
	closedir(d);
	if (removed)
		log_msg(LOG_LVL_INFO, log_fields("dir", sub, NULL),
			"reaper: removed %d orphaned director%s", removed, removed == 1 ? "y" : "ies");
}

static void global_sweeps(struct supervisor *s)
{
	char ttl[16], days[16];

	(void)snprintf(ttl, sizeof(ttl), "%lld", (long long)cfg_int(CFG_IDEMPOTENCY_TTL_SEC));
	(void)snprintf(days, sizeof(days), "%lld", (long long)cfg_int(CFG_AUDIT_RETENTION_DAYS));
	const char *p1[] = { ttl }, *p2[] = { days };
	if (!db_command(&s->db,
			"DELETE FROM idempotency WHERE created_at < now() - make_interval(secs => $1::int)",
			1, p1))
		log_warn("reaper: idempotency sweep failed: %s", s->db.last_error);
	(void)db_command(&s->db, "SET sandbox.audit_retention = on", 0, NULL);
	if (!db_command(&s->db,
			"DELETE FROM audit_events WHERE ts < now() - make_interval(days => $1::int)",
			1, p2))
		log_warn("reaper: audit retention sweep failed: %s", s->db.last_error);
	(void)db_command(&s->db, "RESET sandbox.audit_retention", 0, NULL);
}

void reaper_tick(struct supervisor *s)
{
	static int64_t last;

	if (last && now_mono_ms() - last < cfg_int(CFG_REAPER_INTERVAL_SEC) * 1000)
		return;
	last = now_mono_ms();
	expire_artifacts(s);
	/* Sandboxes, cgroups and mounts no live run accounts for. */
	oci_cleanup_leftovers(s);
	if (runtime_available(s, "docker"))
		docker_reconcile(s);
	workspace_cleanup_leftovers();
	/* A run's directory (its frames, its artifacts) stays while its row
	 * does; a session's while the session is live. */
	orphans(s, "runs", "SELECT 1 FROM runs WHERE id = $1::uuid AND $2::text IS NOT NULL");
	orphans(s, "sessions",
		"SELECT 1 FROM sessions WHERE id = $1::uuid AND node_id = $2"
		" AND state IN ('provisioning', 'ready')");
	PGresult *lock = db_exec(&s->db, "SELECT pg_try_advisory_lock(" REAPER_LOCK ")", 0, NULL);
	if (!lock)
		return;
	bool mine = PQgetvalue(lock, 0, 0)[0] == 't';
	PQclear(lock);
	if (!mine)
		return; /* another supervisor sweeps the database now */
	global_sweeps(s);
	(void)db_command(&s->db, "SELECT pg_advisory_unlock(" REAPER_LOCK ")", 0, NULL);
}
