/* libFuzzer: what a client controls in an upload — the multipart body and
 * its boundary, and every path (archive entry names, URL paths). No crash,
 * no overread (ASan); every part lies inside the body; a path that passes
 * is relative, without dot segments or backslashes, and survives being
 * checked again. */
#include "../../fcgi/multipart.h"
#include "../../lib/wspath.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const unsigned char *lo, *hi;

static int on_part(void *ctx, const struct mp_part *p)
{
	(void)ctx;
	if (p->len && (p->data < lo || p->data + p->len > hi))
		abort();
	if (strlen(p->name) >= sizeof(p->name) || strlen(p->filename) >= sizeof(p->filename))
		abort();
	return 0;
}

static void check_clean(const char *p)
{
	const char *why;

	if (p[0] == '/' || strchr(p, '\\') || strstr(p, "//") ||
	    wspath_check(p, 64, &why) != 0)
		abort();
	for (const char *s = p; s;) {
		if (strncmp(s, "..", 2) == 0 && (s[2] == '/' || !s[2]))
			abort();
		if (s[0] == '.' && (s[1] == '/' || !s[1]))
			abort();
		s = strchr(s, '/');
		if (s)
			s++;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1), out[WSPATH_MAX + 1], ct[256];
	const char *why;
	bool dir;

	memcpy(s, data, size);
	s[size] = '\0';
	if (wspath_entry(s, 64, out, sizeof(out), &dir, &why) == 0)
		check_clean(out);
	if (wspath_from_url(s, 64, out, sizeof(out), &why) == 0)
		check_clean(out);
	/* The first line is a Content-Type, the rest the body. */
	char *nl = memchr(s, '\n', size);
	if (nl && (size_t)(nl - s) < sizeof(ct)) {
		char boundary[80];
		memcpy(ct, s, (size_t)(nl - s));
		ct[nl - s] = '\0';
		if (multipart_boundary(ct, boundary, sizeof(boundary)) == 0) {
			lo = (const unsigned char *)nl + 1;
			hi = (const unsigned char *)s + size;
			(void)multipart_parse(lo, (size_t)(hi - lo), boundary, on_part, NULL, &why);
		}
	}
	free(s);
	return 0;
}
