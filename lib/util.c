/* util.c: see util.h */
#include "util.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

int parse_i64(const char *s, int64_t min, int64_t max, int64_t *out,
	      const char **err)
{
	char *end = NULL;
	long long v;

	if (!s || !*s || isspace((unsigned char)*s)) {
		*err = "not a number";
		return -1;
	}
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno == ERANGE) {
		*err = "out of range";
		return -1;
	}
	if (*end != '\0') {
		*err = "not a whole number";
		return -1;
	}
	if (v < min || v > max) {
		*err = "out of range";
		return -1;
	}
	*out = v;
	return 0;
}

int parse_double(const char *s, double min, double max, double *out,
		 const char **err)
{
	char *end = NULL;
	double v;

	if (!s || !*s || isspace((unsigned char)*s)) {
		*err = "not a number";
		return -1;
	}
	errno = 0;
	v = strtod(s, &end);
	if (errno == ERANGE || !isfinite(v)) {
		*err = "out of range";
		return -1;
	}
	if (*end != '\0') {
		*err = "not a number";
		return -1;
	}
	if (v < min || v > max) {
		*err = "out of range";
		return -1;
	}
	*out = v;
	return 0;
}

int parse_bool(const char *s, bool *out)
{
	static const char *yes[] = { "1", "true", "yes", "on" };
	static const char *no[] = { "0", "false", "no", "off" };

	for (size_t i = 0; i < ARRAY_SIZE(yes); i++) {
		if (strcasecmp(s, yes[i]) == 0) {
			*out = true;
			return 0;
		}
		if (strcasecmp(s, no[i]) == 0) {
			*out = false;
			return 0;
		}
	}
	return -1;
}

bool strlcpy_ok(char *dst, const char *src, size_t n)
{
	size_t len = strlen(src);

	if (n == 0)
		return false;
	if (len >= n) {
		memcpy(dst, src, n - 1);
		dst[n - 1] = '\0';
		return false;
	}
	memcpy(dst, src, len + 1);
	return true;
}

char *xstrdup(const char *s)
{
	char *p = strdup(s ? s : "");

	if (!p)
		abort();
	return p;
}

void *xcalloc(size_t n, size_t sz)
{
	void *p = calloc(n ? n : 1, sz ? sz : 1);

	if (!p)
		abort();
	return p;
}

char *strtrim(char *s)
{
	char *e;

	while (isspace((unsigned char)*s))
		s++;
	e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = '\0';
	return s;
}

int64_t now_mono_ms(void)
{
	struct timespec ts;

	(void)clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void rfc3339_utc(int64_t epoch_sec, char out[32])
{
	time_t t = (time_t)epoch_sec;
	struct tm tm;

	gmtime_r(&t, &tm);
	(void)strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

int hex_digit(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}
