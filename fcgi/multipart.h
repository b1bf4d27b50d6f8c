/* multipart.h: a multipart/form-data body (RFC 7578) held in memory (an
 * mmap of nginx's spooled file). Pure: no I/O, fuzzed. */
#ifndef SANDBOX_API_MULTIPART_H
#define SANDBOX_API_MULTIPART_H

#include <stddef.h>

struct mp_part {
	char name[128];
	char filename[1100]; /* "" when the part is not a file */
	const unsigned char *data;
	size_t len;
};

/* The boundary parameter of a Content-Type header; -1 if none / invalid. */
int multipart_boundary(const char *content_type, char *out, size_t outlen);

/* Calls cb for every part, in order; stops when cb returns non-zero and
 * returns that. -1 with *why for a malformed body. */
int multipart_parse(const unsigned char *buf, size_t len, const char *boundary,
		    int (*cb)(void *ctx, const struct mp_part *p), void *ctx,
		    const char **why);

#endif
