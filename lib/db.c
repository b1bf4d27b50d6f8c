/* db.c: see db.h */
#include "db.h"
#include "log.h"
#include "util.h"

#include <string.h>

static char last_state[6];

void db_init(struct db *db, const char *conninfo)
{
	memset(db, 0, sizeof(*db));
	db->conninfo = xstrdup(conninfo);
}

void db_close(struct db *db)
{
	if (db->conn)
		PQfinish(db->conn);
	db->conn = NULL;
	free(db->conninfo);
	db->conninfo = NULL;
}

static bool db_connect(struct db *db)
{
	if (db->conn)
		PQfinish(db->conn);
	/* connect_timeout bounds how long a request can hang on a dead
	 * server; the application name shows up in pg_stat_activity. */
	const char *keys[] = { "dbname", "connect_timeout", "application_name",
			       NULL };
	const char *vals[] = { db->conninfo, "3", "sandbox", NULL };
	db->conn = PQconnectdbParams(keys, vals, 1);
	if (PQstatus(db->conn) != CONNECTION_OK) {
		(void)strlcpy_ok(db->last_error, PQerrorMessage(db->conn),
				 sizeof(db->last_error));
		strtrim(db->last_error);
		PQfinish(db->conn);
		db->conn = NULL;
		return false;
	}
	return true;
}

bool db_ok(struct db *db)
{
	if (db->conn && PQstatus(db->conn) == CONNECTION_OK) {
		PGresult *r = PQexec(db->conn, "SELECT 1");
		bool ok = PQresultStatus(r) == PGRES_TUPLES_OK;
		PQclear(r);
		if (ok)
			return true;
	}
	return db_connect(db);
}

const char *db_sqlstate(struct db *db)
{
	(void)db;
	return last_state;
}

PGresult *db_exec(struct db *db, const char *sql, int nparams,
		  const char *const *params)
{
	for (int attempt = 0; attempt < 2; attempt++) {
		if (!db->conn || PQstatus(db->conn) != CONNECTION_OK) {
			if (!db_connect(db))
				return NULL;
		}
		PGresult *r = PQexecParams(db->conn, sql, nparams, NULL, params,
					   NULL, NULL, 0);
		ExecStatusType st = PQresultStatus(r);
		if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) {
			last_state[0] = '\0';
			return r;
		}
		const char *state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
		(void)strlcpy_ok(last_state, state ? state : "", sizeof(last_state));
		(void)strlcpy_ok(db->last_error, PQresultErrorMessage(r),
				 sizeof(db->last_error));
		strtrim(db->last_error);
		PQclear(r);
		/* A statement error on a good connection is the caller's to
		 * handle; only a broken connection earns a retry. */
		if (PQstatus(db->conn) == CONNECTION_OK)
			return NULL;
	}
	return NULL;
}

bool db_command(struct db *db, const char *sql, int nparams, const char *const *params)
{
	PGresult *r = db_exec(db, sql, nparams, params);

	if (!r)
		return false;
	PQclear(r);
	return true;
}
