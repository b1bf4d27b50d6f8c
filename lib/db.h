/* db.h: one libpq connection per process, re-established on demand so a
 * PostgreSQL restart costs failed requests, never a process restart. */
#ifndef SANDBOX_DB_H
#define SANDBOX_DB_H

#include <libpq-fe.h>
#include <stdbool.h>

struct db {
	PGconn *conn;
	char *conninfo;
	char last_error[256];
};

static inline void pgresp(PGresult **r)
{
	if (*r)
		PQclear(*r);
}
#define _cleanup_pgres_ __attribute__((cleanup(pgresp)))

void db_init(struct db *db, const char *conninfo);
void db_close(struct db *db);
/* Connected and healthy (reconnects when the connection was lost). */
bool db_ok(struct db *db);
/* Run a parameterised statement (text params, NULL = SQL NULL). Returns
 * the result when its status is COMMAND_OK or TUPLES_OK, NULL otherwise
 * with db->last_error set. Retries once on a fresh connection when the
 * old one was broken. */
PGresult *db_exec(struct db *db, const char *sql, int nparams,
		  const char *const *params);
/* A statement whose rows nobody needs: true if it succeeded. */
bool db_command(struct db *db, const char *sql, int nparams, const char *const *params);
/* SQLSTATE of the last failed statement ("" if none). */
const char *db_sqlstate(struct db *db);

#endif
