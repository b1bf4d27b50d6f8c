/* tap.h: the smallest TAP producer: ok(cond, name), done(). */
#ifndef SANDBOX_TAP_H
#define SANDBOX_TAP_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int tap_n, tap_failed;

#define ok(cond, ...)                                                   \
	do {                                                            \
		tap_n++;                                                \
		if (!(cond))                                            \
			tap_failed++;                                   \
		printf("%sok %d - ", (cond) ? "" : "not ", tap_n);      \
		printf(__VA_ARGS__);                                    \
		printf("\n");                                           \
		if (!(cond))                                            \
			printf("#   failed at %s:%d\n", __FILE__, __LINE__); \
	} while (0)

/* Tests must not see the caller's SANDBOX_* settings. */
extern char **environ;
static inline void clear_env(void)
{
	for (;;) {
		char **e = environ, name[256];
		while (*e && strncmp(*e, "SANDBOX_", 8) != 0)
			e++;
		if (!*e)
			break;
		size_t n = strcspn(*e, "=");
		if (n > 255)
			n = 255;
		memcpy(name, *e, n);
		name[n] = '\0';
		unsetenv(name);
	}
}

static inline int done(void)
{
	printf("1..%d\n", tap_n);
	return tap_failed ? 1 : 0;
}

#endif
