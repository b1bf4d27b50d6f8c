/* config.c: see config.h */
#include "config.h"
#include "util.h"

#include <errno.h>
#include <json-c/json.h>
#include <stdarg.h>
#include <string.h>

extern char **environ;

const struct cfg_key cfg_keys[CFG__COUNT] = {
#define X(n, t, d, lo, hi, c, f) { "SANDBOX_" #n, CFGT_##t, d, lo, hi, c, f },
	SANDBOX_CONFIG_KEYS(X)
#undef X
};

struct cfg_value {
	int64_t i;
	double d;
	bool b;
	char *s;
	char **list;
	size_t nlist;
};

static struct cfg_value values[CFG__COUNT];

static int fail(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	(void)vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return -1;
}

static void value_clear(struct cfg_value *v)
{
	free(v->s);
	for (size_t i = 0; i < v->nlist; i++)
		free(v->list[i]);
	free(v->list);
	memset(v, 0, sizeof(*v));
}

static int find_key(const char *name)
{
	for (int i = 0; i < CFG__COUNT; i++)
		if (strcmp(cfg_keys[i].name, name) == 0)
			return i;
	return -1;
}

static bool choice_ok(const char *choices, const char *v)
{
	size_t n = strlen(v);
	const char *p = choices;

	while (*p) {
		const char *e = strchr(p, '|');
		size_t len = e ? (size_t)(e - p) : strlen(p);
		if (len == n && strncmp(p, v, n) == 0)
			return true;
		if (!e)
			break;
		p = e + 1;
	}
	return false;
}

/* A list is "a,b" or a JSON array of strings (PRD: "comma- or JSON-list"). */
static int parse_list(const char *name, const char *text, struct cfg_value *v,
		      char *err, size_t errlen)
{
	_cleanup_free_ char *copy = xstrdup(text);
	char *t = strtrim(copy);

	if (*t == '[') {
		struct json_object *a = json_tokener_parse(t);
		if (!a || !json_object_is_type(a, json_type_array)) {
			json_object_put(a);
			return fail(err, errlen, "%s: not a JSON list of strings", name);
		}
		size_t n = json_object_array_length(a);
		v->list = xcalloc(n + 1, sizeof(char *));
		for (size_t i = 0; i < n; i++) {
			struct json_object *e = json_object_array_get_idx(a, i);
			if (!json_object_is_type(e, json_type_string)) {
				json_object_put(a);
				return fail(err, errlen, "%s: item %zu is not a string",
					    name, i);
			}
			v->list[v->nlist++] = xstrdup(json_object_get_string(e));
		}
		json_object_put(a);
	} else {
		size_t n = 1;
		for (const char *p = t; *p; p++)
			n += *p == ',';
		v->list = xcalloc(n + 1, sizeof(char *));
		for (char *save = NULL, *tok = strtok_r(t, ",", &save); tok;
		     tok = strtok_r(NULL, ",", &save)) {
			tok = strtrim(tok);
			if (*tok)
				v->list[v->nlist++] = xstrdup(tok);
		}
	}
	if (v->nlist == 0)
		return fail(err, errlen, "%s: the list is empty", name);
	return 0;
}

static int set_value(int id, const char *text, char *err, size_t errlen)
{
	const struct cfg_key *k = &cfg_keys[id];
	struct cfg_value nv = { 0 };
	const char *why = NULL;
	_cleanup_free_ char *copy = xstrdup(text);
	char *t = strtrim(copy);

	switch (k->type) {
	case CFGT_INT:
		if (parse_i64(t, (int64_t)k->min, (int64_t)k->max, &nv.i, &why) < 0)
			return fail(err, errlen,
				    "%s=%s: %s (allowed %.0f..%.0f)", k->name, t,
				    why, k->min, k->max);
		break;
	case CFGT_FLOAT:
		if (parse_double(t, k->min, k->max, &nv.d, &why) < 0)
			return fail(err, errlen, "%s=%s: %s (allowed %g..%g)",
				    k->name, t, why, k->min, k->max);
		break;
	case CFGT_BOOL:
		if (parse_bool(t, &nv.b) < 0)
			return fail(err, errlen, "%s=%s: not a boolean (true|false)",
				    k->name, t);
		break;
	case CFGT_ENUM:
		if (!choice_ok(k->choices, t))
			return fail(err, errlen, "%s=%s: not one of %s", k->name, t,
				    k->choices);
		nv.s = xstrdup(t);
		break;
	case CFGT_STR:
		nv.s = xstrdup(t);
		break;
	case CFGT_LIST:
		if (parse_list(k->name, t, &nv, err, errlen) < 0) {
			value_clear(&nv);
			return -1;
		}
		break;
	}
	value_clear(&values[id]);
	values[id] = nv;
	return 0;
}

int cfg_set(const char *name, const char *value, char *err, size_t errlen)
{
	int id = find_key(name);

	if (id < 0)
		return fail(err, errlen, "unknown configuration key %s", name);
	return set_value(id, value, err, errlen);
}

static int load_file(const char *path, char *err, size_t errlen)
{
	FILE *f = fopen(path, "re");
	char line[4096];
	int lineno = 0, rc = 0;

	if (!f)
		return fail(err, errlen, "config file %s: %s", path, strerror(errno));
	while (fgets(line, sizeof(line), f)) {
		lineno++;
		char *s = strtrim(line);
		if (*s == '\0' || *s == '#')
			continue;
		char *eq = strchr(s, '=');
		if (!eq) {
			rc = fail(err, errlen, "%s:%d: expected key = value", path,
				  lineno);
			break;
		}
		*eq = '\0';
		char *key = strtrim(s), *val = strtrim(eq + 1);
		if (cfg_set(key, val, err, errlen) < 0) {
			char inner[512];
			(void)strlcpy_ok(inner, err, sizeof(inner));
			rc = fail(err, errlen, "%s:%d: %s", path, lineno, inner);
			break;
		}
	}
	fclose(f);
	return rc;
}

int cfg_load(const char *file, char *err, size_t errlen)
{
	cfg_free();
	for (int i = 0; i < CFG__COUNT; i++)
		if (set_value(i, cfg_keys[i].def, err, errlen) < 0)
			return -1;
	if (!file)
		file = getenv("SANDBOX_CONFIG_FILE");
	if (file && *file && load_file(file, err, errlen) < 0)
		return -1;
	for (char **e = environ; *e; e++) {
		if (strncmp(*e, "SANDBOX_", 8) != 0)
			continue;
		const char *eq = strchr(*e, '=');
		if (!eq)
			continue;
		char name[128];
		size_t n = (size_t)(eq - *e);
		if (n >= sizeof(name))
			return fail(err, errlen, "unknown configuration key %.64s...",
				    *e);
		memcpy(name, *e, n);
		name[n] = '\0';
		if (strcmp(name, "SANDBOX_CONFIG_FILE") == 0)
			continue;
		if (cfg_set(name, eq + 1, err, errlen) < 0)
			return -1;
	}
	return 0;
}

void cfg_free(void)
{
	for (int i = 0; i < CFG__COUNT; i++)
		value_clear(&values[i]);
}

int64_t cfg_int(enum cfg_id id) { return values[id].i; }
double cfg_float(enum cfg_id id) { return values[id].d; }
bool cfg_bool(enum cfg_id id) { return values[id].b; }
const char *cfg_str(enum cfg_id id) { return values[id].s ? values[id].s : ""; }

size_t cfg_list(enum cfg_id id, const char *const **items)
{
	*items = (const char *const *)values[id].list;
	return values[id].nlist;
}

void cfg_dump(FILE *out)
{
	for (int i = 0; i < CFG__COUNT; i++) {
		const struct cfg_key *k = &cfg_keys[i];
		if (k->flags & CFG_CLIENT)
			continue;
		fprintf(out, "%s = ", k->name);
		if (k->flags & CFG_SECRET) {
			fputs(*cfg_str(i) ? "[redacted]\n" : "\n", out);
			continue;
		}
		switch (k->type) {
		case CFGT_INT:
			fprintf(out, "%lld\n", (long long)values[i].i);
			break;
		case CFGT_FLOAT:
			fprintf(out, "%g\n", values[i].d);
			break;
		case CFGT_BOOL:
			fputs(values[i].b ? "true\n" : "false\n", out);
			break;
		case CFGT_LIST:
			for (size_t j = 0; j < values[i].nlist; j++)
				fprintf(out, "%s%s", j ? "," : "", values[i].list[j]);
			fputc('\n', out);
			break;
		default:
			fprintf(out, "%s\n", cfg_str(i));
		}
	}
}
