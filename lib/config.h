/* config.h: the SANDBOX_* keys (PRD §17, "Runtimes Defaults", and the keys
 * this implementation adds). Effective value = default, then the optional
 * `key = value` file, then the environment. An unknown key or a value out
 * of range is a startup error naming the key. */
#ifndef SANDBOX_CONFIG_H
#define SANDBOX_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define CFG_POLICY 1u /* input of policy_hash (PRD "Policy Hash") */
#define CFG_SECRET 2u /* never printed, logged or hashed */
#define CFG_CLIENT 4u /* used by clients (var/dev.env); servers ignore it */

/* X(name, type, default, min, max, choices, flags) */
#define SANDBOX_CONFIG_KEYS(X)                                                   \
	X(DEFAULT_RUNTIME, ENUM, "oci", 0, 0, "oci|docker|firecracker", CFG_POLICY) \
	X(NETWORK_DEFAULT, ENUM, "deny_all", 0, 0, "deny_all", CFG_POLICY)          \
	X(MAX_UPLOAD_MB, INT, "64", 1, 4096, NULL, CFG_POLICY)                      \
	X(MAX_LOG_BYTES, INT, "10485760", 1024, 1073741824, NULL, CFG_POLICY)       \
	X(WORKSPACE_CAP_MB, INT, "256", 1, 65536, NULL, CFG_POLICY)                 \
	X(ARTIFACT_TTL_HOURS, INT, "24", 1, 8760, NULL, CFG_POLICY)                 \
	X(MAX_ARTIFACT_BYTES_PER_RUN_MB, INT, "32", 0, 65536, NULL, CFG_POLICY)     \
	X(MAX_ARTIFACT_BYTES_PER_USER_MB, INT, "128", 0, 1048576, NULL, CFG_POLICY) \
	X(MAX_CPU, FLOAT, "4.0", 0.01, 1024, NULL, CFG_POLICY)                      \
	X(MAX_MEM_MB, INT, "8192", 16, 4194304, NULL, CFG_POLICY)                   \
	X(PIDS_LIMIT, INT, "256", 8, 4194304, NULL, CFG_POLICY)                     \
	X(ULIMIT_NOFILE, INT, "1024", 16, 1048576, NULL, CFG_POLICY)                \
	X(ULIMIT_NPROC, INT, "512", 8, 4194304, NULL, CFG_POLICY)                   \
	X(DEFAULT_STARTUP_TIMEOUT_SEC, INT, "20", 1, 3600, NULL, CFG_POLICY)        \
	X(DEFAULT_EXEC_TIMEOUT_SEC, INT, "60", 1, 86400, NULL, CFG_POLICY)          \
	X(CANCEL_GRACE_SECONDS, INT, "5", 0, 300, NULL, CFG_POLICY)                 \
	X(ENABLE_EXECUTION, BOOL, "true", 0, 0, NULL, CFG_POLICY)                   \
	X(BACKGROUND_EXECUTION, BOOL, "true", 0, 0, NULL, CFG_POLICY)               \
	X(DOCKER_SECCOMP, STR, "", 0, 0, NULL, CFG_POLICY)                          \
	X(DOCKER_APPARMOR_PROFILE, STR, "", 0, 0, NULL, CFG_POLICY)                 \
	X(SUPPORTED_SPEC_VERSIONS, LIST, "1.0,1.1", 0, 0, NULL, CFG_POLICY)         \
	X(MAX_CONCURRENT_RUNS, INT, "8", 1, 4096, NULL, 0)                          \
	X(USER_MAX_CONCURRENT_RUNS, INT, "4", 1, 4096, NULL, 0)                     \
	X(QUEUE_MAX_LENGTH, INT, "100", 0, 1000000, NULL, 0)                        \
	X(QUEUE_TTL_SEC, INT, "120", 1, 86400, NULL, 0)                             \
	X(IDEMPOTENCY_TTL_SEC, INT, "600", 1, 604800, NULL, 0)                      \
	X(STORE_BACKEND, ENUM, "postgres", 0, 0, "postgres", 0)                     \
	X(WS_POLL_TIMEOUT_SEC, INT, "30", 1, 3600, NULL, 0)                         \
	X(WS_SYNTHETIC_FRAMES_FOR_TESTS, BOOL, "false", 0, 0, NULL, 0)              \
	X(WS_SIGNED_URL_TTL_SEC, INT, "60", 1, 86400, NULL, 0)                      \
	X(WS_SIGNED_URLS, BOOL, "false", 0, 0, NULL, 0)                             \
	X(WS_REPLAY_MAX_FRAMES, INT, "100000", 10, 10000000, NULL, 0)               \
	X(WS_SIGNING_SECRET, STR, "", 0, 0, NULL, CFG_SECRET)                       \
	X(SESSION_MAX_LIFETIME, INT, "86400", 60, 2592000, NULL, 0)                 \
	X(AUDIT_RETENTION_DAYS, INT, "30", 1, 3650, NULL, 0)                        \
	X(SESSION_TTL_SEC, INT, "1800", 10, 2592000, NULL, 0)                       \
	X(USER_MAX_SESSIONS, INT, "16", 1, 100000, NULL, 0)                         \
	X(MAX_UPLOAD_FILES, INT, "1000", 1, 1000000, NULL, 0)                       \
	X(MAX_UPLOAD_DEPTH, INT, "10", 1, 64, NULL, 0)                              \
	X(MAX_UPLOAD_EXPANDED_MB, INT, "256", 1, 65536, NULL, 0)                    \
	X(MAX_UPLOAD_RATIO, INT, "100", 1, 100000, NULL, 0)                         \
	X(MAX_ARTIFACT_FILES, INT, "1000", 1, 1000000, NULL, 0)                     \
	X(FILES_LIST_MAX, INT, "1000", 1, 100000, NULL, 0)                          \
	X(REAPER_INTERVAL_SEC, INT, "900", 5, 86400, NULL, 0)                       \
	X(SESSION_SWEEP_SEC, INT, "30", 1, 30, NULL, 0)                             \
	X(USER_MAX_QUEUED_RUNS, INT, "50", 1, 1000000, NULL, 0)                     \
	X(USER_DAILY_CPU_SEC, INT, "86400", 0, 100000000, NULL, 0)                  \
	X(RATE_LIMIT_RPS, INT, "50", 1, 1000000, NULL, 0)                           \
	X(RATE_LIMIT_BURST, INT, "200", 0, 1000000, NULL, 0)                        \
	X(METRICS_ALLOW, LIST, "127.0.0.1,::1", 0, 0, NULL, 0)                      \
	X(METRICS_TOKEN, STR, "", 0, 0, NULL, CFG_SECRET)                           \
	X(DATABASE_URL, STR, "dbname=sandbox", 0, 0, NULL, CFG_SECRET)              \
	X(DATA_ROOT, STR, "/var/lib/sandbox", 0, 0, NULL, 0)                        \
	X(API_SOCKET, STR, "/run/sandbox/api.sock", 0, 0, NULL, 0)                  \
	X(API_WORKERS, INT, "4", 1, 256, NULL, 0)                                   \
	X(API_USER, STR, "sandbox", 0, 0, NULL, 0)                                  \
	X(MAX_JSON_BODY_KB, INT, "4096", 16, 65536, NULL, 0)                        \
	X(SUPERVISOR_SOCKET, STR, "/run/sandbox/supervisor.sock", 0, 0, NULL, 0)    \
	X(NODE_ID, STR, "", 0, 0, NULL, 0)                                          \
	X(PUBLIC_URL, STR, "", 0, 0, NULL, 0)                                       \
	X(LOG_LEVEL, ENUM, "info", 0, 0, "debug|info|warn|error", 0)                \
	X(OCI_RUNTIME, STR, "crun", 0, 0, NULL, 0)                                  \
	X(DOCKER_HOST, STR, "/var/run/docker.sock", 0, 0, NULL, 0)                  \
	X(INIT_PATH, STR, "/usr/libexec/sandbox/sandbox-init", 0, 0, NULL, 0)       \
	X(IMAGES_DIR, STR, "/var/lib/sandbox/images", 0, 0, NULL, 0)                \
	X(IMAGE_ALIASES, LIST, "python:3.11-slim=python,python:3.11=python,node:20-alpine=node,node:20=node,bash=shell,debian:bookworm-slim=shell", 0, 0, NULL, 0) \
	X(HEARTBEAT_SEC, INT, "5", 1, 300, NULL, 0)                                 \
	X(NODE_STALE_SEC, INT, "30", 2, 3600, NULL, 0)                              \
	X(RUNTIME_PROBE_SEC, INT, "60", 5, 86400, NULL, 0)                          \
	X(URL, STR, "", 0, 0, NULL, CFG_CLIENT)                                     \
	X(API_KEY, STR, "", 0, 0, NULL, CFG_CLIENT | CFG_SECRET)

enum cfg_id {
#define X(n, t, d, lo, hi, c, f) CFG_##n,
	SANDBOX_CONFIG_KEYS(X)
#undef X
	CFG__COUNT
};

enum cfg_type { CFGT_INT, CFGT_FLOAT, CFGT_BOOL, CFGT_STR, CFGT_LIST, CFGT_ENUM };

struct cfg_key {
	const char *name; /* full name, "SANDBOX_..." */
	enum cfg_type type;
	const char *def;
	double min, max;
	const char *choices; /* "a|b|c" for ENUM */
	unsigned flags;
};

extern const struct cfg_key cfg_keys[CFG__COUNT];

/* Load defaults, then `file` (NULL: $SANDBOX_CONFIG_FILE when set), then
 * the environment. On error returns -1 and writes a message naming the
 * key into err. */
int cfg_load(const char *file, char *err, size_t errlen);
/* Set one key from text (used by the loader and by tests). */
int cfg_set(const char *name, const char *value, char *err, size_t errlen);
void cfg_free(void);

int64_t cfg_int(enum cfg_id id);
double cfg_float(enum cfg_id id);
bool cfg_bool(enum cfg_id id);
const char *cfg_str(enum cfg_id id); /* STR and ENUM; never NULL */
size_t cfg_list(enum cfg_id id, const char *const **items);

/* Print the effective configuration (secrets redacted) for `-n`. */
void cfg_dump(FILE *out);

#endif
