/* log.h: one JSON object per line on stderr (ts, level, component,
 * request_id, message, fields), ready for journald. Field names that look
 * like secrets are redacted before anything is written. */
#ifndef SANDBOX_LOG_H
#define SANDBOX_LOG_H

#include <json-c/json.h>

enum log_level { LOG_LVL_DEBUG, LOG_LVL_INFO, LOG_LVL_WARN, LOG_LVL_ERROR };

void log_init(const char *component);
int log_level_parse(const char *s);
void log_set_level(int level);
/* The request (or run) this process is working for; NULL clears it. */
void log_set_request_id(const char *request_id);
const char *log_request_id(void);

/* fields (may be NULL) is consumed. */
void log_msg(int level, struct json_object *fields, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#define log_debug(...) log_msg(LOG_LVL_DEBUG, NULL, __VA_ARGS__)
#define log_info(...) log_msg(LOG_LVL_INFO, NULL, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_LVL_WARN, NULL, __VA_ARGS__)
#define log_error(...) log_msg(LOG_LVL_ERROR, NULL, __VA_ARGS__)

/* Build a fields object from "key", "value" string pairs ending in NULL. */
struct json_object *log_fields(const char *key, ...);

#endif
