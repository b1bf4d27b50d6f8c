/*
 * sandboxctl: the operator's command line, talking to PostgreSQL directly.
 *
 *   sandboxctl migrate DIR           apply DIR/NNN_name.sql not yet applied
 *   sandboxctl key create --user U [--admin] [--label L]
 *                                    create the user if needed, print a new
 *                                    API key (shown once, stored hashed)
 *   sandboxctl key list [--user U]   id, user, role, label, created, last
 *                                    used, revoked
 *   sandboxctl key revoke ID         revoke a key by id
 *
 * Configuration (SANDBOX_DATABASE_URL) as for the servers; -c FILE.
 */
#include "../lib/config.h"
#include "../lib/crypto.h"
#include "../lib/db.h"
#include "../lib/log.h"
#include "../lib/util.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

static struct db db;

static int die_db(const char *what)
{
	fprintf(stderr, "sandboxctl: %s: %s\n", what, db.last_error);
	return 1;
}

static PGresult *exec_raw(const char *sql)
{
	PGresult *r = PQexec(db.conn, sql);
	ExecStatusType st = PQresultStatus(r);

	if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK)
		return r;
	(void)strlcpy_ok(db.last_error, PQresultErrorMessage(r),
			 sizeof(db.last_error));
	strtrim(db.last_error);
	PQclear(r);
	return NULL;
}

static char *read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "re");
	char *buf;
	long n;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) < 0 || (n = ftell(f)) < 0 ||
	    fseek(f, 0, SEEK_SET) < 0) {
		fclose(f);
		return NULL;
	}
	buf = xcalloc(1, (size_t)n + 1);
	*len = fread(buf, 1, (size_t)n, f);
	fclose(f);
	return buf;
}

static int filter_sql(const struct dirent *d)
{
	size_t n = strlen(d->d_name);
	return n > 8 && d->d_name[0] >= '0' && d->d_name[0] <= '9' &&
	       d->d_name[3] == '_' && strcmp(d->d_name + n - 4, ".sql") == 0;
}

static int cmd_migrate(const char *dir)
{
	struct dirent **list;
	int n, rc = 0, applied = 0;
	PGresult *r;

	if (!db_ok(&db))
		return die_db("connect");
	r = exec_raw("SET client_min_messages TO warning;"
		     "CREATE TABLE IF NOT EXISTS schema_migrations ("
		     " version integer PRIMARY KEY, name text NOT NULL,"
		     " sha256 text NOT NULL,"
		     " applied_at timestamptz NOT NULL DEFAULT now());"
		     "SELECT pg_advisory_lock(hashtext('sandbox.migrate'))");
	if (!r)
		return die_db("migrations table");
	PQclear(r);
	n = scandir(dir, &list, filter_sql, alphasort);
	if (n < 0) {
		fprintf(stderr, "sandboxctl: %s: %s\n", dir, strerror(errno));
		return 1;
	}
	for (int i = 0; i < n && rc == 0; i++) {
		char path[4096], hash[65], ver[4];
		size_t len = 0;
		(void)snprintf(path, sizeof(path), "%s/%s", dir, list[i]->d_name);
		memcpy(ver, list[i]->d_name, 3);
		ver[3] = '\0';
		_cleanup_free_ char *sql = read_file(path, &len);
		if (!sql) {
			fprintf(stderr, "sandboxctl: %s: %s\n", path, strerror(errno));
			rc = 1;
			break;
		}
		sha256_hex(sql, len, hash);
		const char *p[] = { ver };
		_cleanup_pgres_ PGresult *have = db_exec(
			&db, "SELECT sha256 FROM schema_migrations WHERE version = $1::int",
			1, p);
		if (!have) {
			rc = die_db("reading schema_migrations");
			break;
		}
		if (PQntuples(have) == 1) {
			if (strcmp(PQgetvalue(have, 0, 0), hash) != 0) {
				fprintf(stderr,
					"sandboxctl: %s was changed after it was "
					"applied; add a new migration instead\n",
					list[i]->d_name);
				rc = 1;
			}
			continue;
		}
		r = exec_raw("BEGIN");
		if (r)
			PQclear(r);
		r = exec_raw(sql);
		if (!r) {
			fprintf(stderr, "sandboxctl: %s: %s\n", list[i]->d_name,
				db.last_error);
			PQclear(exec_raw("ROLLBACK"));
			rc = 1;
			break;
		}
		PQclear(r);
		const char *p2[] = { ver, list[i]->d_name, hash };
		r = db_exec(&db,
			    "INSERT INTO schema_migrations (version, name, sha256) "
			    "VALUES ($1::int, $2, $3)",
			    3, p2);
		if (!r) {
			rc = die_db("recording migration");
			PQclear(exec_raw("ROLLBACK"));
			break;
		}
		PQclear(r);
		r = exec_raw("COMMIT");
		if (!r) {
			rc = die_db("commit");
			break;
		}
		PQclear(r);
		printf("applied %s\n", list[i]->d_name);
		applied++;
	}
	for (int i = 0; i < n; i++)
		free(list[i]);
	free(list);
	if (rc == 0 && applied == 0)
		printf("schema up to date\n");
	return rc;
}

static int cmd_key_create(const char *user, bool admin, const char *label)
{
	unsigned char idb[6], secret[24];
	char idhex[13], sechex[49], key[80], hash[65], id[20];

	if (!db_ok(&db))
		return die_db("connect");
	random_bytes(idb, sizeof(idb));
	random_bytes(secret, sizeof(secret));
	hex_encode(idb, sizeof(idb), idhex);
	hex_encode(secret, sizeof(secret), sechex);
	(void)snprintf(id, sizeof(id), "key_%s", idhex);
	(void)snprintf(key, sizeof(key), "sbx_%s_%s", idhex, sechex);
	sha256_hex(key, strlen(key), hash);
	const char *p[] = { user, admin ? "admin" : "user", id, hash, label };
	_cleanup_pgres_ PGresult *r = db_exec(
		&db,
		"WITH u AS (INSERT INTO users (id, role) VALUES ($1, $2) "
		"  ON CONFLICT (id) DO UPDATE SET role = CASE WHEN $2 = 'admin' "
		"    THEN 'admin' ELSE users.role END RETURNING id) "
		"INSERT INTO api_keys (id, user_id, key_hash, label) "
		"SELECT $3, u.id, $4, $5 FROM u RETURNING id",
		5, p);
	if (!r)
		return die_db("creating key");
	printf("%s\n", key);
	fprintf(stderr, "created %s for user %s%s\n", id, user,
		admin ? " (admin)" : "");
	return 0;
}

static int cmd_key_list(const char *user)
{
	const char *p[] = { user };
	if (!db_ok(&db))
		return die_db("connect");
	_cleanup_pgres_ PGresult *r = db_exec(
		&db,
		"SELECT k.id, k.user_id, u.role, k.label, "
		"  to_char(k.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'), "
		"  coalesce(to_char(k.last_used_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'), '-'), "
		"  coalesce(to_char(k.revoked_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'), '-') "
		"FROM api_keys k JOIN users u ON u.id = k.user_id "
		"WHERE $1::text IS NULL OR k.user_id = $1 ORDER BY k.created_at",
		1, p);
	if (!r)
		return die_db("listing keys");
	printf("%-18s %-16s %-6s %-21s %-21s %-21s %s\n", "ID", "USER", "ROLE",
	       "CREATED", "LAST_USED", "REVOKED", "LABEL");
	for (int i = 0; i < PQntuples(r); i++)
		printf("%-18s %-16s %-6s %-21s %-21s %-21s %s\n", PQgetvalue(r, i, 0),
		       PQgetvalue(r, i, 1), PQgetvalue(r, i, 2), PQgetvalue(r, i, 4),
		       PQgetvalue(r, i, 5), PQgetvalue(r, i, 6), PQgetvalue(r, i, 3));
	return 0;
}

static int cmd_key_revoke(const char *id)
{
	const char *p[] = { id };
	if (!db_ok(&db))
		return die_db("connect");
	_cleanup_pgres_ PGresult *r = db_exec(
		&db,
		"UPDATE api_keys SET revoked_at = coalesce(revoked_at, now()) "
		"WHERE id = $1 RETURNING id",
		1, p);
	if (!r)
		return die_db("revoking key");
	if (PQntuples(r) == 0) {
		fprintf(stderr, "sandboxctl: no key %s\n", id);
		return 1;
	}
	printf("revoked %s\n", id);
	return 0;
}

static int usage(void)
{
	fprintf(stderr,
		"usage: sandboxctl [-c config] migrate DIR\n"
		"       sandboxctl [-c config] key create --user NAME [--admin] [--label TEXT]\n"
		"       sandboxctl [-c config] key list [--user NAME]\n"
		"       sandboxctl [-c config] key revoke KEY_ID\n");
	return 2;
}

int main(int argc, char **argv)
{
	const char *cfgfile = NULL, *user = NULL, *label = "";
	bool admin = false;
	char err[512];
	int i = 1, rc;

	log_init("sandboxctl");
	if (i + 1 < argc && strcmp(argv[i], "-c") == 0) {
		cfgfile = argv[i + 1];
		i += 2;
	}
	if (cfg_load(cfgfile, err, sizeof(err)) < 0) {
		fprintf(stderr, "sandboxctl: configuration error: %s\n", err);
		return 1;
	}
	if (i >= argc)
		return usage();
	const char *cmd = argv[i++];
	const char *sub = i < argc ? argv[i] : "";
	for (int j = i + 1; j < argc; j++) {
		if (strcmp(argv[j], "--user") == 0 && j + 1 < argc)
			user = argv[++j];
		else if (strcmp(argv[j], "--label") == 0 && j + 1 < argc)
			label = argv[++j];
		else if (strcmp(argv[j], "--admin") == 0)
			admin = true;
	}
	db_init(&db, cfg_str(CFG_DATABASE_URL));
	if (strcmp(cmd, "migrate") == 0 && *sub)
		rc = cmd_migrate(sub);
	else if (strcmp(cmd, "key") == 0 && strcmp(sub, "create") == 0 && user)
		rc = cmd_key_create(user, admin, label);
	else if (strcmp(cmd, "key") == 0 && strcmp(sub, "list") == 0)
		rc = cmd_key_list(user);
	else if (strcmp(cmd, "key") == 0 && strcmp(sub, "revoke") == 0 &&
		 i + 1 < argc)
		rc = cmd_key_revoke(argv[i + 1]);
	else
		rc = usage();
	db_close(&db);
	cfg_free();
	return rc;
}
