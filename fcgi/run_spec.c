/* run_spec.c: see run_spec.h. */
#include "run_spec.h"
#include "images.h"
#include "router.h"
#include "../lib/config.h"
#include "../lib/util.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

static int bad(struct request *r, int status, const char *field, const char *msg)
{
	struct json_object *d = json_object_new_object();
	json_object_object_add(d, "field", json_object_new_string(field));
	respond_error(r, status, "invalid_request", d, "%s: %s", field, msg);
	return -1;
}

/* A JSON string without embedded NUL bytes. */
static bool clean_string(struct json_object *v)
{
	return json_object_is_type(v, json_type_string) &&
	       strlen(json_object_get_string(v)) == (size_t)json_object_get_string_len(v);
}

static int get_int(struct request *r, struct json_object *body, const char *k,
		   int def, int min, int max, int *out)
{
	struct json_object *v;
	if (!json_object_object_get_ex(body, k, &v) || !v) {
		*out = def;
		return 0;
	}
	if (!json_object_is_type(v, json_type_int)) {
		return bad(r, 400, k, "must be an integer");
	}
	int64_t x = json_object_get_int64(v);
	if (x < min || x > max) {
		char m[96];
		(void)snprintf(m, sizeof(m), "must be between %d and %d", min, max);
		return bad(r, 400, k, m);
	}
	*out = (int)x;
	return 0;
}

int spec_version_check(struct request *r, struct json_object *body, const char **out)
{
	struct json_object *v = NULL;
	const char *const *items;
	size_t n = cfg_list(CFG_SUPPORTED_SPEC_VERSIONS, &items);

	json_object_object_get_ex(body, "spec_version", &v);
	if (v && json_object_is_type(v, json_type_string)) {
		for (size_t i = 0; i < n; i++) {
			if (strcmp(items[i], json_object_get_string(v)) == 0) {
				*out = items[i];
				return 0;
			}
		}
	}
	struct json_object *d = json_object_new_object(), *sup = json_object_new_array();
	for (size_t i = 0; i < n; i++)
		json_object_array_add(sup, json_object_new_string(items[i]));
	json_object_object_add(d, "supported", sup);
	json_object_object_add(d, "provided",
			       v ? json_object_new_string(json_object_get_string(v)) : NULL);
	if (!v)
		respond_error(r, 400, "invalid_spec_version", d, "spec_version is required");
	else
		respond_error(r, 400, "invalid_spec_version", d,
			      "Unsupported spec_version '%.40s'", json_object_get_string(v));
	return -1;
}

int runtime_check(struct request *r, const char *runtime)
{
	static const char *const known[] = { "oci", "docker", "firecracker" };
	bool ok = false;
	int nodes = 0;
	double age;

	for (size_t i = 0; i < ARRAY_SIZE(known); i++)
		ok |= strcmp(known[i], runtime) == 0;
	if (!ok) {
		struct json_object *d = json_object_new_object();
		json_object_object_add(d, "field", json_object_new_string("runtime"));
		json_object_object_add(d, "allowed", json_object_new_string("oci, docker, firecracker"));
		respond_error(r, 400, "invalid_request", d, "unknown runtime '%.40s'", runtime);
		return -1;
	}
	struct json_object *rep = runtimes_reported(r, &nodes, &age), *one = NULL, *av = NULL;
	if (!rep) {
		respond_db_error(r);
		return -1;
	}
	if (json_object_object_get_ex(rep, runtime, &one) &&
	    json_object_object_get_ex(one, "available", &av) && json_object_get_boolean(av)) {
		json_object_put(rep);
		return 0;
	}
	struct json_object *d = json_object_new_object(), *sug = json_object_new_array();
	json_object_object_foreach(rep, name, info)
	{
		struct json_object *a = NULL;
		if (json_object_object_get_ex(info, "available", &a) && json_object_get_boolean(a))
			json_object_array_add(sug, json_object_new_string(name));
	}
	json_object_object_add(d, "runtime", json_object_new_string(runtime));
	json_object_object_add(d, "available", json_object_new_boolean(0));
	json_object_object_add(d, "suggested", sug);
	struct json_object *notes = NULL;
	if (one && json_object_object_get_ex(one, "notes", &notes) && notes)
		json_object_object_add(d, "notes", json_object_get(notes));
	json_object_put(rep);
	respond_error(r, 503, "runtime_unavailable", d,
		      "Requested runtime '%s' is not available", runtime);
	return -1;
}

/* Relative, normalized, confined: no empty or dot segments, no absolute
 * path, no backslashes, at most 10 levels and 255 bytes a segment. */
static bool safe_rel_path(const char *p)
{
	size_t n = strlen(p);
	int depth = 0;

	if (n == 0 || n > 1024 || p[0] == '/' || strchr(p, '\\'))
		return false;
	const char *s = p;
	while (*s) {
		const char *e = strchr(s, '/');
		size_t len = e ? (size_t)(e - s) : strlen(s);
		if (len == 0 || len > 255 || (len == 1 && s[0] == '.') ||
		    (len == 2 && s[0] == '.' && s[1] == '.'))
			return false;
		for (size_t i = 0; i < len; i++)
			if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
				return false;
		if (++depth > 10)
			return false;
		if (!e)
			break;
		s = e + 1;
		if (!*s)
			return false;
	}
	return true;
}

static int check_command(struct request *r, struct json_object *cmd)
{
	size_t total = 0, n;

	if (!cmd || !json_object_is_type(cmd, json_type_array))
		return bad(r, 400, "command", "required: an array of strings");
	n = json_object_array_length(cmd);
	if (n < 1 || n > MAX_COMMAND_ARGS)
		return bad(r, 400, "command", "must have 1 to 256 elements");
	for (size_t i = 0; i < n; i++) {
		struct json_object *a = json_object_array_get_idx(cmd, i);
		if (!clean_string(a))
			return bad(r, 400, "command", "elements must be strings without NUL bytes");
		total += (size_t)json_object_get_string_len(a) + 1;
	}
	if (json_object_get_string_len(json_object_array_get_idx(cmd, 0)) == 0)
		return bad(r, 400, "command", "the program name must not be empty");
	if (total > MAX_COMMAND_BYTES)
		return bad(r, 400, "command", "longer than 256 KiB in total");
	return 0;
}

static int check_env(struct request *r, struct json_object *env)
{
	size_t total = 0;

	if (!env)
		return 0;
	if (!json_object_is_type(env, json_type_object))
		return bad(r, 400, "env", "must be an object of strings");
	if (json_object_object_length(env) > MAX_ENV_VARS)
		return bad(r, 400, "env", "at most 256 variables");
	json_object_object_foreach(env, k, v)
	{
		size_t kl = strlen(k);
		bool ok = kl > 0 && kl <= 128 && (isalpha((unsigned char)k[0]) || k[0] == '_');
		for (size_t i = 1; ok && i < kl; i++)
			ok = isalnum((unsigned char)k[i]) || k[i] == '_';
		if (!ok)
			return bad(r, 400, "env", "names must match [A-Za-z_][A-Za-z0-9_]{0,127}");
		if (!clean_string(v))
			return bad(r, 400, "env", "values must be strings without NUL bytes");
		total += kl + (size_t)json_object_get_string_len(v) + 2;
	}
	if (total > MAX_ENV_BYTES)
		return bad(r, 400, "env", "larger than 64 KiB in total");
	return 0;
}

static bool b64_ok(const char *s, size_t n, size_t *decoded)
{
	if (n % 4)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (!(isalnum((unsigned char)c) || c == '+' || c == '/' ||
		      (c == '=' && i >= n - 2)))
			return false;
	}
	size_t pad = (n && s[n - 1] == '=') + (n > 1 && s[n - 2] == '=');
	*decoded = n / 4 * 3 - pad;
	return true;
}

static int check_files(struct request *r, struct json_object *files)
{
	size_t total = 0, n;

	if (!files)
		return 0;
	if (!json_object_is_type(files, json_type_array))
		return bad(r, 400, "files", "must be an array of {path, content_b64}");
	n = json_object_array_length(files);
	if (n > MAX_INLINE_FILES)
		return bad(r, 400, "files", "at most 100 inline files");
	for (size_t i = 0; i < n; i++) {
		struct json_object *f = json_object_array_get_idx(files, i), *p = NULL, *c = NULL;
		size_t dec = 0;
		if (!json_object_is_type(f, json_type_object) ||
		    !json_object_object_get_ex(f, "path", &p) || !clean_string(p) ||
		    !json_object_object_get_ex(f, "content_b64", &c) || !clean_string(c))
			return bad(r, 400, "files", "each item needs string path and content_b64");
		if (!safe_rel_path(json_object_get_string(p))) {
			struct json_object *d = json_object_new_object();
			json_object_object_add(d, "field", json_object_new_string("files"));
			json_object_object_add(d, "path", json_object_new_string(json_object_get_string(p)));
			respond_error(r, 400, "invalid_request", d,
				      "files: unsafe path '%.200s' (relative, no '.' or '..', "
				      "at most 10 levels)", json_object_get_string(p));
			return -1;
		}
		if (!b64_ok(json_object_get_string(c), (size_t)json_object_get_string_len(c), &dec))
			return bad(r, 400, "files", "content_b64 is not valid base64");
		total += dec;
		for (size_t k = 0; k < i; k++) {
			struct json_object *o = json_object_array_get_idx(files, k), *op;
			json_object_object_get_ex(o, "path", &op);
			if (strcmp(json_object_get_string(op), json_object_get_string(p)) == 0)
				return bad(r, 400, "files", "the same path appears twice");
		}
	}
	if (total > MAX_INLINE_FILES_BYTES) {
		struct json_object *d = json_object_new_object();
		json_object_object_add(d, "field", json_object_new_string("files"));
		json_object_object_add(d, "max_bytes", json_object_new_int(MAX_INLINE_FILES_BYTES));
		json_object_object_add(d, "bytes", json_object_new_int64((int64_t)total));
		respond_error(r, 413, "payload_too_large", d,
			      "inline files total %zu bytes; the limit is 1 MiB "
			      "(upload larger inputs to a session)", total);
		return -1;
	}
	return 0;
}

static int check_capture(struct request *r, struct json_object *cap)
{
	if (!cap)
		return 0;
	if (!json_object_is_type(cap, json_type_array) ||
	    json_object_array_length(cap) > MAX_CAPTURE_PATTERNS)
		return bad(r, 400, "capture_patterns", "must be an array of at most 64 strings");
	for (size_t i = 0; i < json_object_array_length(cap); i++) {
		struct json_object *p = json_object_array_get_idx(cap, i);
		if (!clean_string(p) || json_object_get_string_len(p) == 0 ||
		    json_object_get_string_len(p) > 256 || json_object_get_string(p)[0] == '/' ||
		    strstr(json_object_get_string(p), ".."))
			return bad(r, 400, "capture_patterns",
				   "patterns are relative globs of 1 to 256 characters without '..'");
	}
	return 0;
}

/* resources: cpu and memory are clamped to the deployment's maxima
 * (PRD "Runtime Limits Normalization"); nonsense is refused. */
static int check_resources(struct request *r, struct json_object *res, struct run_spec *s)
{
	struct json_object *v;

	if (s->cpu == 0) { /* a session's limits are a run's defaults */
		s->cpu = 1.0;
		s->memory_mb = 512;
		s->pids = (int)cfg_int(CFG_PIDS_LIMIT);
	}
	if (res && !json_object_is_type(res, json_type_object))
		return bad(r, 400, "resources", "must be an object");
	if (res) {
		json_object_object_foreach(res, k, val)
		{
			(void)val;
			if (strcmp(k, "cpu") && strcmp(k, "memory_mb") && strcmp(k, "pids"))
				return bad(r, 400, "resources", "known keys are cpu, memory_mb, pids");
		}
	}
	if (res && json_object_object_get_ex(res, "cpu", &v)) {
		if (!(json_object_is_type(v, json_type_double) || json_object_is_type(v, json_type_int)) ||
		    !isfinite(json_object_get_double(v)) || json_object_get_double(v) <= 0)
			return bad(r, 400, "resources.cpu", "must be a positive number");
		s->cpu = json_object_get_double(v);
	}
	if (res && json_object_object_get_ex(res, "memory_mb", &v)) {
		if (!json_object_is_type(v, json_type_int) || json_object_get_int64(v) < 16)
			return bad(r, 400, "resources.memory_mb", "must be an integer of at least 16");
		int64_t m = json_object_get_int64(v);
		s->memory_mb = m > INT32_MAX ? INT32_MAX : (int)m;
	}
	if (res && json_object_object_get_ex(res, "pids", &v)) {
		if (!json_object_is_type(v, json_type_int) || json_object_get_int64(v) < 8)
			return bad(r, 400, "resources.pids", "must be an integer of at least 8");
		int64_t p = json_object_get_int64(v);
		if (p < s->pids)
			s->pids = (int)p;
	}
	if (s->cpu > cfg_float(CFG_MAX_CPU))
		s->cpu = cfg_float(CFG_MAX_CPU);
	if (s->cpu < 0.01)
		s->cpu = 0.01;
	if (s->memory_mb > cfg_int(CFG_MAX_MEM_MB))
		s->memory_mb = (int)cfg_int(CFG_MAX_MEM_MB);
	return 0;
}

/* Spec 1.1: interactive runs and their stdin limits. Defaults follow the
 * PRD's vNext notes: 1 MiB in total, 64 KiB a frame, 64 KiB/s, 30 s idle. */
static int check_interactive(struct request *r, struct json_object *body, struct run_spec *s)
{
	static const struct {
		const char *name;
		int64_t def, min, max;
	} lim[] = {
		{ "stdin_max_bytes", 1048576, 1, 16777216 },
		{ "stdin_max_frame_bytes", 65536, 1, 65536 },
		{ "stdin_bps", 65536, 1, 16777216 },
		{ "stdin_idle_timeout_sec", 30, 1, 3600 },
	};
	int64_t *out[] = { &s->stdin_max_bytes, &s->stdin_max_frame_bytes, &s->stdin_bps,
			   &s->stdin_idle_timeout_sec };
	struct json_object *v = NULL;
	bool any = false;

	if (json_object_object_get_ex(body, "interactive", &v) && v) {
		if (!json_object_is_type(v, json_type_boolean))
			return bad(r, 400, "interactive", "must be a boolean");
		s->interactive = json_object_get_boolean(v);
		any = true;
	}
	for (size_t i = 0; i < ARRAY_SIZE(lim); i++) {
		*out[i] = lim[i].def;
		if (!json_object_object_get_ex(body, lim[i].name, &v) || !v)
			continue;
		any = true;
		if (!json_object_is_type(v, json_type_int) || json_object_get_int64(v) < lim[i].min ||
		    json_object_get_int64(v) > lim[i].max) {
			char m[96];
			(void)snprintf(m, sizeof(m), "must be an integer from %lld to %lld",
				       (long long)lim[i].min, (long long)lim[i].max);
			return bad(r, 400, lim[i].name, m);
		}
		*out[i] = json_object_get_int64(v);
	}
	/* 1.0 requests keep working unchanged: the 1.1 fields need 1.1. */
	if (any && strcmp(s->spec_version, "1.0") == 0) {
		struct json_object *d = json_object_new_object();
		json_object_object_add(d, "field", json_object_new_string("interactive"));
		json_object_object_add(d, "requires_spec_version", json_object_new_string("1.1"));
		respond_error(r, 400, "invalid_request", d,
			      "interactive and stdin_* fields need spec_version 1.1");
		return -1;
	}
	return 0;
}

void run_spec_free(struct run_spec *s)
{
	json_object_put(s->session_env);
	s->session_env = NULL;
}

int spec_network_policy(struct request *r, struct json_object *body)
{
	struct json_object *v = NULL;

	if (json_object_object_get_ex(body, "network_policy", &v) && v &&
	    !(json_object_is_type(v, json_type_string) &&
	      strcmp(json_object_get_string(v), "deny_all") == 0)) {
		struct json_object *d = json_object_new_object(), *sup = json_object_new_array();
		json_object_array_add(sup, json_object_new_string("deny_all"));
		json_object_object_add(d, "field", json_object_new_string("network_policy"));
		json_object_object_add(d, "supported", sup);
		respond_error(r, 400, "policy_unsupported", d,
			      "network_policy '%.64s' is not supported; only deny_all is",
			      json_object_get_string(v));
		return -1;
	}
	return 0;
}

int spec_known_fields(struct request *r, struct json_object *body, const char *const *known,
		      size_t nknown, const char *what)
{
	struct json_object *unknown = json_object_new_array();

	json_object_object_foreach(body, k, val)
	{
		(void)val;
		bool ok = false;
		for (size_t i = 0; i < nknown; i++)
			ok |= strcmp(k, known[i]) == 0;
		if (!ok)
			json_object_array_add(unknown, json_object_new_string(k));
	}
	if (json_object_array_length(unknown) > 0) {
		struct json_object *d = json_object_new_object();
		json_object_object_add(d, "unknown_fields", unknown);
		respond_error(r, 400, "invalid_request", d, "unknown field(s) in the %s", what);
		return -1;
	}
	json_object_put(unknown);
	return 0;
}

int spec_bad(struct request *r, int status, const char *field, const char *msg)
{
	return bad(r, status, field, msg);
}

bool spec_string(struct json_object *v)
{
	return clean_string(v);
}

int spec_int(struct request *r, struct json_object *body, const char *k, int def, int min,
	     int max, int *out)
{
	return get_int(r, body, k, def, min, max, out);
}

int spec_env(struct request *r, struct json_object *env)
{
	return check_env(r, env);
}

int spec_resources(struct request *r, struct json_object *res, struct run_spec *s)
{
	return check_resources(r, res, s);
}

int run_spec_parse(struct request *r, struct json_object *body, struct run_spec *s)
{
	static const char *const known[] = {
		"spec_version", "runtime", "session_id", "base_image", "command", "env",
		"files", "timeout_sec", "startup_timeout_sec", "resources",
		"network_policy", "capture_patterns", "interactive", "stdin_max_bytes",
		"stdin_max_frame_bytes", "stdin_bps", "stdin_idle_timeout_sec",
		"resume_from_seq", "labels"
	};
	struct json_object *v = NULL;

	memset(s, 0, sizeof(*s));
	if (spec_known_fields(r, body, known, ARRAY_SIZE(known), "run spec") < 0)
		return -1;
	if (spec_version_check(r, body, &s->spec_version) < 0)
		return -1;

	struct json_object *sid = NULL, *img = NULL;
	json_object_object_get_ex(body, "session_id", &sid);
	json_object_object_get_ex(body, "base_image", &img);
	if ((sid && img) || (!sid && !img)) {
		struct json_object *d = json_object_new_object(), *f = json_object_new_array();
		json_object_array_add(f, json_object_new_string("session_id"));
		json_object_array_add(f, json_object_new_string("base_image"));
		json_object_object_add(d, "fields", f);
		respond_error(r, 422, "invalid_request", d,
			      sid ? "give either session_id or base_image, not both"
				  : "one of session_id or base_image is required");
		return -1;
	}
	if (sid) {
		if (!clean_string(sid))
			return bad(r, 400, "session_id", "must be a string");
		if (json_object_object_get_ex(body, "runtime", &v) && v)
			return bad(r, 400, "runtime", "a run in a session uses the session's runtime");
		/* Image, runtime, limits and env come from the session. */
		if (session_for_run(r, json_object_get_string(sid), s) < 0)
			return -1;
	} else {
		if (!clean_string(img) || json_object_get_string_len(img) == 0)
			return bad(r, 400, "base_image", "must be a non-empty string");
		s->base_image = json_object_get_string(img);
		s->runtime = cfg_str(CFG_DEFAULT_RUNTIME);
	}
	if (!sid && json_object_object_get_ex(body, "runtime", &v) && v) {
		if (!clean_string(v))
			return bad(r, 400, "runtime", "must be a string");
		s->runtime = json_object_get_string(v);
	}
	if (spec_network_policy(r, body) < 0)
		return -1;
	if (json_object_object_get_ex(body, "resume_from_seq", &v) && v) {
		if (!json_object_is_type(v, json_type_int) || json_object_get_int64(v) < 1)
			return bad(r, 400, "resume_from_seq", "must be a positive integer");
		s->resume_from_seq = json_object_get_int64(v);
	}
	if (check_interactive(r, body, s) < 0)
		return -1;

	json_object_object_get_ex(body, "command", &s->command);
	json_object_object_get_ex(body, "env", &s->env);
	if (check_env(r, s->env) < 0)
		return -1;
	if (s->session_env) { /* the run's variables win over the session's */
		if (s->env) {
			json_object_object_foreach(s->env, ek, ev)
			json_object_object_add(s->session_env, ek, json_object_get(ev));
		}
		s->env = s->session_env;
	}
	json_object_object_get_ex(body, "files", &s->files);
	json_object_object_get_ex(body, "capture_patterns", &s->capture);
	struct json_object *res = NULL;
	json_object_object_get_ex(body, "resources", &res);
	if (check_command(r, s->command) < 0 ||
	    check_files(r, s->files) < 0 || check_capture(r, s->capture) < 0 ||
	    check_resources(r, res, s) < 0 ||
	    get_int(r, body, "timeout_sec",
		    sid ? s->timeout_sec : (int)cfg_int(CFG_DEFAULT_EXEC_TIMEOUT_SEC), 1,
		    MAX_TIMEOUT_SEC, &s->timeout_sec) < 0 ||
	    get_int(r, body, "startup_timeout_sec",
		    sid ? s->startup_timeout_sec : (int)cfg_int(CFG_DEFAULT_STARTUP_TIMEOUT_SEC),
		    1, MAX_STARTUP_TIMEOUT_SEC, &s->startup_timeout_sec) < 0)
		return -1;
	if (sid)
		return 0; /* the session's image, resolved when it was created */
	if (runtime_check(r, s->runtime) < 0)
		return -1;
	return image_resolve(r, s->base_image, s->image, s->digest);
}
