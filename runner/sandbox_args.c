/* sandbox_args.c: what every runtime starts inside a sandbox — the
 * arguments of sandbox-init followed by the run's command, and the
 * environment — built once for config.json (oci) and the create body
 * (docker). */
#include "supervisor.h"
#include "../lib/util.h"

#include <stdio.h>
#include <string.h>

/* Appends `-u UID -g GID -n NOFILE -p NPROC -t CPU -w /workspace
 * [-S /.sandbox-status] -- COMMAND...` to a. status_file: the runtime
 * cannot pass fd 3 (docker, runsc), init reports through the mounted
 * /.sandbox-status instead. */
void sandbox_init_args(struct json_object *a, const struct run *r, bool status_file)
{
	char num[4][24];
	struct json_object *cmd = NULL;

	(void)snprintf(num[0], sizeof(num[0]), "%u", (unsigned)r->uid);
	(void)snprintf(num[1], sizeof(num[1]), "%d", r->nofile);
	(void)snprintf(num[2], sizeof(num[2]), "%d", r->nproc);
	/* RLIMIT_CPU: the execution timeout plus 2 s of grace (PRD §12),
	 * a last line behind the supervisor's own timer. */
	(void)snprintf(num[3], sizeof(num[3]), "%d", r->timeout_sec + 2);
	const char *args[] = { "-u", num[0], "-g", num[0], "-n", num[1], "-p", num[2],
			       "-t", num[3], "-w", "/workspace", NULL };
	for (const char *const *p = args; *p; p++)
		json_object_array_add(a, json_object_new_string(*p));
	if (status_file) {
		json_object_array_add(a, json_object_new_string("-S"));
		json_object_array_add(a, json_object_new_string("/.sandbox-status"));
	}
	json_object_array_add(a, json_object_new_string("--"));
	json_object_object_get_ex(r->row, "command", &cmd);
	for (size_t i = 0; cmd && i < json_object_array_length(cmd); i++)
		json_object_array_add(a, json_object_get(json_object_array_get_idx(cmd, i)));
}

/* The sandbox's environment: fixed defaults, then the run's own `env`
 * (validated by the api: names and sizes). */
struct json_object *sandbox_env(const struct run *r)
{
	static const char *const defaults[] = { "PATH=/usr/local/bin:/usr/bin:/bin",
						"HOME=/workspace", "TMPDIR=/tmp",
						"LANG=C.UTF-8", NULL };
	struct json_object *env = json_object_new_array(), *envo = NULL;

	for (const char *const *d = defaults; *d; d++)
		json_object_array_add(env, json_object_new_string(*d));
	json_object_object_get_ex(r->row, "env", &envo);
	if (envo && json_object_is_type(envo, json_type_object)) {
		json_object_object_foreach(envo, k, v)
		{
			const char *val = json_object_get_string(v);
			size_t n = strlen(k) + strlen(val) + 2;
			char *kv = xcalloc(1, n);
			(void)snprintf(kv, n, "%s=%s", k, val);
			json_object_array_add(env, json_object_new_string(kv));
			free(kv);
		}
	}
	return env;
}
