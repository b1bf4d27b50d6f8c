/* stop.c: ending runs from outside their own course — a user's cancel
 * (SIGTERM, SANDBOX_CANCEL_GRACE_SECONDS, SIGKILL of the whole sandbox),
 * the end of their session, the supervisor's own stop. The state machine
 * itself is lifecycle.c's. */
#include "supervisor.h"
#include "../lib/config.h"
#include "../lib/log.h"
#include "../lib/util.h"

#include <signal.h>
#include <string.h>

void run_cancel(const char *run_id)
{
	bool local = false;
	for (struct run *r = sup->runs; r; r = r->next)
		local |= strcmp(r->id, run_id) == 0;
	if (!local) {
		/* Canceled while still queued: the api ended it; record the end
		 * frame, as no sandbox will. */
		const char *p[] = { run_id };
		PGresult *res = db_exec(&sup->db,
					"SELECT 1 FROM runs WHERE id = $1::uuid AND phase = 'killed' "
					"AND node_id IS NULL",
					1, p);
		if (res && PQntuples(res) == 1)
			frames_append_end(run_id, "killed", "canceled_by_user", "canceled_by_user");
		if (res)
			PQclear(res);
		return;
	}
	for (struct run *r = sup->runs; r; r = r->next) {
		if (strcmp(r->id, run_id) != 0)
			continue;
		if (r->final_phase || r->state >= RS_EXITED)
			return;
		end_with(r, "killed", "canceled_by_user", "canceled_by_user");
		log_msg(LOG_LVL_INFO, run_fields(r), "cancel: SIGTERM, SIGKILL after %llds",
			(long long)cfg_int(CFG_CANCEL_GRACE_SECONDS));
		if (r->docker && r->helper > 0 && r->state == RS_RUNNING) {
			/* The driver asks dockerd for a TERM, then a KILL. */
			(void)kill(r->helper, SIGTERM);
			r->kill_deadline = now_mono_ms() + cfg_int(CFG_CANCEL_GRACE_SECONDS) * 1000;
			if (cfg_int(CFG_CANCEL_GRACE_SECONDS) == 0)
				kill_now(r);
			arm_timer(r);
		} else if (r->docker) {
			kill_now(r);
		} else if (r->helper > 0 && r->helper_kind == CHILD_CREATE) {
			/* `crun run` is half-way: let it finish (the sandbox is
			 * killed as soon as it reports), rather than leave a
			 * half-made container behind. */
		} else if (r->init_pid > 0 && r->state == RS_RUNNING) {
			oci_term(r);
			r->kill_deadline = now_mono_ms() + cfg_int(CFG_CANCEL_GRACE_SECONDS) * 1000;
			if (cfg_int(CFG_CANCEL_GRACE_SECONDS) == 0)
				kill_now(r);
			arm_timer(r);
		} else {
			kill_now(r);
		}
		return;
	}
}

int runs_kill_session(const char *session_id, const char *reason, const char *message)
{
	/* end_with keeps the pointers: the reason must be a constant. */
	static const char *const reasons[] = { "session_deleted", "session_expired",
					       "session_failed" };
	static char messages[3][64];
	const char *why = reasons[0], *msg = messages[0];
	int n = 0;

	for (size_t i = 0; i < ARRAY_SIZE(reasons); i++) {
		if (strcmp(reason, reasons[i]) == 0) {
			why = reasons[i];
			(void)strlcpy_ok(messages[i], message, sizeof(messages[i]));
			msg = messages[i];
		}
	}
	for (struct run *r = sup->runs; r; r = r->next) {
		if (strcmp(r->session_id, session_id) != 0)
			continue;
		n++;
		if (r->final_phase || r->state >= RS_EXITED)
			continue;
		end_with(r, "killed", why, msg);
		log_msg(LOG_LVL_INFO, run_fields(r), "the run's session ended: %s", why);
		kill_now(r);
	}
	return n;
}

/* Supervisor stop: every sandbox is killed; its run ends `failed` with
 * reason supervisor_restart once the kill is through. */
void runs_shutdown(void)
{
	for (struct run *r = sup->runs; r; r = r->next) {
		end_with(r, "failed", "supervisor_restart",
			 "the supervisor stopped while the run was in flight");
		kill_now(r);
	}
}
