/* log.c: see log.h */
#include "log.h"
#include "util.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>
#include <time.h>

static char component_[32] = "sandbox";
static char request_id_[129];
static int level_ = LOG_LVL_INFO;
static const char *level_names[] = { "debug", "info", "warn", "error" };

void log_init(const char *component)
{
	(void)strlcpy_ok(component_, component, sizeof(component_));
}

int log_level_parse(const char *s)
{
	for (size_t i = 0; i < ARRAY_SIZE(level_names); i++)
		if (strcasecmp(s, level_names[i]) == 0)
			return (int)i;
	return -1;
}

void log_set_level(int level) { level_ = level; }

void log_set_request_id(const char *request_id)
{
	if (!request_id)
		request_id_[0] = '\0';
	else
		(void)strlcpy_ok(request_id_, request_id, sizeof(request_id_));
}

const char *log_request_id(void) { return request_id_; }

/* Secrets must never reach a log line, whatever the caller passed. */
static bool secret_key(const char *k)
{
	static const char *needles[] = { "secret", "token", "password",
					 "api_key", "apikey", "authorization" };

	for (size_t i = 0; i < ARRAY_SIZE(needles); i++)
		if (strcasestr(k, needles[i]))
			return true;
	return false;
}

void log_msg(int level, struct json_object *fields, const char *fmt, ...)
{
	char msg[2048], ts[64];
	struct json_object *o;
	struct timeval tv;
	struct tm tm;
	va_list ap;

	if (level < level_) {
		json_object_put(fields);
		return;
	}
	va_start(ap, fmt);
	(void)vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);

	gettimeofday(&tv, NULL);
	gmtime_r(&tv.tv_sec, &tm);
	(void)snprintf(ts, sizeof(ts), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ",
		       tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
		       tm.tm_min, tm.tm_sec, (long)(tv.tv_usec / 1000) % 1000);

	o = json_object_new_object();
	json_object_object_add(o, "ts", json_object_new_string(ts));
	json_object_object_add(o, "level",
			       json_object_new_string(level_names[level]));
	json_object_object_add(o, "component",
			       json_object_new_string(component_));
	if (request_id_[0])
		json_object_object_add(o, "request_id",
				       json_object_new_string(request_id_));
	json_object_object_add(o, "message", json_object_new_string(msg));
	if (fields) {
		json_object_object_foreach(fields, k, v)
		{
			if (secret_key(k))
				json_object_object_add(
					o, k, json_object_new_string("[redacted]"));
			else
				json_object_object_add(o, k, json_object_get(v));
		}
		json_object_put(fields);
	}
	/* One write per line so lines from several workers never interleave. */
	const char *s = json_object_to_json_string_ext(
		o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
	size_t n = strlen(s);
	char *line = malloc(n + 2);
	if (line) {
		memcpy(line, s, n);
		line[n] = '\n';
		(void)!write(STDERR_FILENO, line, n + 1);
		free(line);
	}
	json_object_put(o);
}

struct json_object *log_fields(const char *key, ...)
{
	struct json_object *o = json_object_new_object();
	va_list ap;

	va_start(ap, key);
	for (const char *k = key; k; k = va_arg(ap, const char *)) {
		const char *v = va_arg(ap, const char *);
		json_object_object_add(o, k, v ? json_object_new_string(v) : NULL);
	}
	va_end(ap);
	return o;
}
