/* util.h: small helpers shared by every process: cleanup attributes,
 * ownership hand-over, checked number parsing, bounded strings. */
#ifndef SANDBOX_UTIL_H
#define SANDBOX_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

static inline void freep(void *p) { free(*(void **)p); }
static inline void closep(int *fd)
{
	if (*fd >= 0)
		(void)close(*fd);
}

/* Variables marked _cleanup_free_ are freed when they leave scope;
 * steal_pointer() hands ownership to someone else visibly. */
#define _cleanup_free_ __attribute__((cleanup(freep)))
#define _cleanup_close_ __attribute__((cleanup(closep)))

static inline void *steal_ptr_(void **p)
{
	void *v = *p;
	*p = NULL;
	return v;
}
#define steal_pointer(pp) steal_ptr_((void **)(pp))

/* strtonum-style parsers: the whole string must be a number within
 * [min, max]. Return 0 on success, -1 with *err set to a short reason. */
int parse_i64(const char *s, int64_t min, int64_t max, int64_t *out,
	      const char **err);
int parse_double(const char *s, double min, double max, double *out,
		 const char **err);
int parse_bool(const char *s, bool *out);

/* Copy at most n-1 bytes and always NUL-terminate; returns false when
 * the source did not fit. */
bool strlcpy_ok(char *dst, const char *src, size_t n);

/* Duplicate or abort: allocation failure in these small helpers is not
 * something a request can recover from. */
char *xstrdup(const char *s);
/* The value of a hexadecimal digit, or -1. */
int hex_digit(int c);
void *xcalloc(size_t n, size_t sz);

/* Trim ASCII whitespace in place; returns s. */
char *strtrim(char *s);

/* Monotonic and wall clocks. */
int64_t now_mono_ms(void);
/* RFC 3339 UTC with second precision ("2026-11-22T07:03:51Z"). */
void rfc3339_utc(int64_t epoch_sec, char out[32]);

#endif
