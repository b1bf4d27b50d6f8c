/* node.c: the supervisor's row in `nodes`. The api reads heartbeat_at to
 * decide readiness and runtimes to answer /runtimes. */
#include "supervisor.h"
#include "../lib/config.h"
#include "../lib/log.h"
#include "../lib/util.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SANDBOX_VERSION "0.1.0"

int node_heartbeat(struct supervisor *s)
{
	char pid[16];
	const char *rt = json_object_to_json_string_ext(s->runtimes,
							JSON_C_TO_STRING_PLAIN);
	(void)snprintf(pid, sizeof(pid), "%d", (int)getpid());
	const struct stream_counters *c = streams_counters();
	char stats[512];
	(void)snprintf(stats, sizeof(stats),
		       "{\"runs_in_flight\":%d,\"ws_connections_opened\":%llu,"
		       "\"ws_disconnects\":%llu,\"ws_heartbeats_sent\":%llu,"
		       "\"ws_queue_drops\":%llu,\"ws_clients\":%d}",
		       s->nruns, (unsigned long long)c->opened,
		       (unsigned long long)c->disconnects, (unsigned long long)c->heartbeats,
		       (unsigned long long)c->drops, streams_clients());
	const char *params[] = { s->node_id, s->hostname, SANDBOX_VERSION, pid,
				 cfg_str(CFG_SUPERVISOR_SOCKET), rt, stats };
	PGresult *r = db_exec(
		&s->db,
		"INSERT INTO nodes (node_id, hostname, version, pid, "
		"  supervisor_socket, runtimes, stats) "
		"VALUES ($1, $2, $3, $4::int, $5, $6::jsonb, $7::jsonb) "
		"ON CONFLICT (node_id) DO UPDATE SET hostname = EXCLUDED.hostname, "
		"  version = EXCLUDED.version, pid = EXCLUDED.pid, "
		"  supervisor_socket = EXCLUDED.supervisor_socket, "
		"  runtimes = EXCLUDED.runtimes, stats = EXCLUDED.stats, heartbeat_at = now(), "
		"  started_at = CASE WHEN nodes.pid = EXCLUDED.pid "
		"    THEN nodes.started_at ELSE now() END",
		7, params);
	if (!r) {
		if (s->registered)
			log_msg(LOG_LVL_WARN,
				log_fields("db_error", s->db.last_error, NULL),
				"heartbeat failed; will retry");
		s->registered = false;
		return -1;
	}
	PQclear(r);
	if (!s->registered)
		log_info("heartbeat registered as node %s", s->node_id);
	s->registered = true;
	return 0;
}

/* On a clean stop the node stops counting as live at once instead of
 * after SANDBOX_NODE_STALE_SEC. */
void node_retire(struct supervisor *s)
{
	const char *params[] = { s->node_id };
	(void)db_command(&s->db, "UPDATE nodes SET heartbeat_at = 'epoch' WHERE node_id = $1",
			 1, params);
}

/* The image catalog: every IMAGES_DIR/<name>/ with a digest file is an
 * image this node can run. */
void images_register(struct supervisor *s)
{
	const char *dir = cfg_str(CFG_IMAGES_DIR);
	DIR *d = opendir(dir);
	struct dirent *e;

	if (!d) {
		log_warn("image directory %s: %s", dir, strerror(errno));
		return;
	}
	while ((e = readdir(d)) != NULL) {
		char path[1024], digest[128] = "", pkgs[512] = "", size[32];
		struct stat st;
		FILE *f;
		if (e->d_name[0] == '.')
			continue;
		(void)snprintf(path, sizeof(path), "%s/%s/digest", dir, e->d_name);
		f = fopen(path, "re");
		if (!f)
			continue;
		if (!fgets(digest, sizeof(digest), f))
			digest[0] = '\0';
		fclose(f);
		strtrim(digest);
		(void)snprintf(path, sizeof(path), "%s/%s/packages", dir, e->d_name);
		f = fopen(path, "re");
		if (f) {
			if (!fgets(pkgs, sizeof(pkgs), f))
				pkgs[0] = '\0';
			fclose(f);
			strtrim(pkgs);
		}
		(void)snprintf(path, sizeof(path), "%s/%s.tar", dir, e->d_name);
		(void)snprintf(size, sizeof(size), "%lld",
			       stat(path, &st) == 0 ? (long long)st.st_size : 0LL);
		const char *p[] = { e->d_name, digest, pkgs, size, s->node_id };
		PGresult *r = db_exec(
			&s->db,
			"INSERT INTO images (name, digest, packages, size_bytes, node_id) "
			"VALUES ($1, $2, $3, $4::bigint, $5) ON CONFLICT (name) DO UPDATE "
			"SET digest = EXCLUDED.digest, packages = EXCLUDED.packages, "
			"  size_bytes = EXCLUDED.size_bytes, node_id = EXCLUDED.node_id, "
			"  updated_at = now() "
			"WHERE images.digest IS DISTINCT FROM EXCLUDED.digest",
			5, p);
		if (r)
			PQclear(r);
		else
			log_warn("registering image %s: %s", e->d_name, s->db.last_error);
	}
	closedir(d);
}

void images_docker_import(struct supervisor *s)
{
	const char *p[] = { s->node_id };
	PGresult *r = db_exec(&s->db, "SELECT name, digest FROM images WHERE node_id = $1", 1, p);

	if (!r)
		return;
	docker_images_forget();
	for (int i = 0; i < PQntuples(r); i++) {
		char tarball[600], id[100];
		(void)snprintf(tarball, sizeof(tarball), "%s/%s.tar", cfg_str(CFG_IMAGES_DIR),
			       PQgetvalue(r, i, 0));
		if (docker_image(PQgetvalue(r, i, 0), PQgetvalue(r, i, 1), tarball, id, sizeof(id)) < 0)
			log_warn("docker: image %s could not be imported", PQgetvalue(r, i, 0));
	}
	PQclear(r);
}
