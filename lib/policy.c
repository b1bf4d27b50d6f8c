/* policy.c: see policy.h */
#include "policy.h"
#include "config.h"
#include "crypto.h"
#include "util.h"

#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#define POLICY_PREFIX "tldw.sandbox.policy:v1\n"

void json_double_repr(double v, char out[40])
{
	if (v == floor(v) && fabs(v) < 1e16) {
		(void)snprintf(out, 40, "%.1f", v);
		return;
	}
	for (int prec = 1; prec <= 17; prec++) {
		(void)snprintf(out, 40, "%.*g", prec, v);
		if (strtod(out, NULL) == v)
			break;
	}
}

/* A seccomp profile is identified by the hash of its contents when the file
 * can be read (so editing the profile changes the policy), else by name. */
static char *seccomp_identity(const char *path)
{
	FILE *f;
	char *buf = NULL, hex[65], *out;
	size_t cap = 0, len = 0, n;

	if (!*path)
		return NULL;
	f = fopen(path, "re");
	if (!f)
		return xstrdup(path);
	for (;;) {
		if (len + 4096 > cap) {
			cap = cap ? cap * 2 : 65536;
			char *nb = realloc(buf, cap);
			if (!nb)
				abort();
			buf = nb;
		}
		n = fread(buf + len, 1, cap - len, f);
		len += n;
		if (n == 0)
			break;
	}
	fclose(f);
	sha256_hex(buf ? buf : "", len, hex);
	free(buf);
	out = xcalloc(1, 72);
	(void)snprintf(out, 72, "sha256:%s", hex);
	return out;
}

static int cmp_name(const void *a, const void *b)
{
	return strcmp(cfg_keys[*(const int *)a].name, cfg_keys[*(const int *)b].name);
}

char *policy_canonical_json(void)
{
	int ids[CFG__COUNT], n = 0;
	size_t cap = 4096, len = 0;
	char *out = xcalloc(1, cap);

	for (int i = 0; i < CFG__COUNT; i++)
		if ((cfg_keys[i].flags & CFG_POLICY) &&
		    !(cfg_keys[i].flags & CFG_SECRET))
			ids[n++] = i;
	qsort(ids, (size_t)n, sizeof(int), cmp_name);

	struct json_object *tmp;
#define APPEND(str)                                                    \
	do {                                                           \
		const char *s_ = (str);                                \
		size_t l_ = strlen(s_);                                \
		while (len + l_ + 1 > cap) {                           \
			cap *= 2;                                      \
			char *nb_ = realloc(out, cap);                 \
			if (!nb_)                                      \
				abort();                               \
			out = nb_;                                     \
		}                                                      \
		memcpy(out + len, s_, l_ + 1);                         \
		len += l_;                                             \
	} while (0)
#define APPEND_JSTR(str)                                                   \
	do {                                                               \
		tmp = json_object_new_string(str);                         \
		APPEND(json_object_to_json_string_ext(                     \
			tmp, JSON_C_TO_STRING_PLAIN |                      \
				     JSON_C_TO_STRING_NOSLASHESCAPE));     \
		json_object_put(tmp);                                      \
	} while (0)

	APPEND("{");
	for (int j = 0; j < n; j++) {
		int id = ids[j];
		char num[40];
		if (j)
			APPEND(",");
		APPEND_JSTR(cfg_keys[id].name);
		APPEND(":");
		switch (cfg_keys[id].type) {
		case CFGT_INT:
			(void)snprintf(num, sizeof(num), "%lld",
				       (long long)cfg_int(id));
			APPEND(num);
			break;
		case CFGT_FLOAT:
			json_double_repr(cfg_float(id), num);
			APPEND(num);
			break;
		case CFGT_BOOL:
			APPEND(cfg_bool(id) ? "true" : "false");
			break;
		case CFGT_LIST: {
			const char *const *items;
			size_t cnt = cfg_list(id, &items);
			APPEND("[");
			for (size_t k = 0; k < cnt; k++) {
				if (k)
					APPEND(",");
				APPEND_JSTR(items[k]);
			}
			APPEND("]");
			break;
		}
		case CFGT_STR:
		case CFGT_ENUM: {
			_cleanup_free_ char *ident = NULL;
			const char *v = cfg_str(id);
			if (id == CFG_DOCKER_SECCOMP)
				v = ident = seccomp_identity(v);
			if (!v || !*v)
				APPEND("null");
			else
				APPEND_JSTR(v);
			break;
		}
		}
	}
	APPEND("}");
#undef APPEND
#undef APPEND_JSTR
	return out;
}

void policy_hash(char out[65])
{
	/* The configuration does not change while a process runs: compute
	 * once (tests that change keys call policy_hash_reset()). */
	static char cached[65];
	if (cached[0]) {
		memcpy(out, cached, 65);
		return;
	}
	policy_hash_compute(cached);
	memcpy(out, cached, 65);
}

void policy_hash_compute(char out[65])
{
	_cleanup_free_ char *json = policy_canonical_json();
	size_t plen = strlen(POLICY_PREFIX), jlen = strlen(json);
	_cleanup_free_ char *buf = xcalloc(1, plen + jlen + 1);

	memcpy(buf, POLICY_PREFIX, plen);
	memcpy(buf + plen, json, jlen);
	sha256_hex(buf, plen + jlen, out);
}
