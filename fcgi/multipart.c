/* multipart.c: see multipart.h. */
#include "multipart.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

int multipart_boundary(const char *ct, char *out, size_t outlen)
{
	const char *p;

	if (!ct || strncasecmp(ct, "multipart/form-data", 19) != 0)
		return -1;
	for (p = ct + 19; (p = strchr(p, ';'));) {
		p++;
		while (*p == ' ' || *p == '\t')
			p++;
		if (strncasecmp(p, "boundary=", 9) != 0)
			continue;
		p += 9;
		size_t n = 0;
		if (*p == '"') {
			p++;
			while (p[n] && p[n] != '"')
				n++;
		} else {
			while (p[n] && p[n] != ';' && p[n] != ' ' && p[n] != '\t')
				n++;
		}
		/* RFC 2046: 1..70 characters. */
		if (n == 0 || n > 70 || n + 1 > outlen)
			return -1;
		memcpy(out, p, n);
		out[n] = '\0';
		return 0;
	}
	return -1;
}

/* A parameter of a Content-Disposition header line (hdr..end), quoted or
 * not; "" when absent. Returns false when malformed or too long. */
static bool disp_param(const char *hdr, const char *end, const char *key, char *out,
		       size_t outlen)
{
	size_t kl = strlen(key);

	out[0] = '\0';
	for (const char *p = hdr; p < end; p++) {
		if (*p != ';')
			continue;
		const char *q = p + 1;
		while (q < end && (*q == ' ' || *q == '\t'))
			q++;
		if ((size_t)(end - q) <= kl || strncasecmp(q, key, kl) != 0 || q[kl] != '=')
			continue;
		q += kl + 1;
		size_t o = 0;
		if (q < end && *q == '"') {
			for (q++; q < end && *q != '"'; q++) {
				if (*q == '\\' && q + 1 < end)
					q++;
				if (o + 1 >= outlen || *q == '\0')
					return false;
				out[o++] = *q;
			}
			if (q >= end)
				return false;
		} else {
			for (; q < end && *q != ';' && *q != ' '; q++) {
				if (o + 1 >= outlen || *q == '\0')
					return false;
				out[o++] = *q;
			}
		}
		out[o] = '\0';
		return true;
	}
	return true;
}

int multipart_parse(const unsigned char *buf, size_t len, const char *boundary,
		    int (*cb)(void *ctx, const struct mp_part *p), void *ctx, const char **why)
{
	char delim[80];
	size_t dl = (size_t)snprintf(delim, sizeof(delim), "\r\n--%s", boundary);
	const unsigned char *p = buf, *end = buf + len;

	if (strlen(boundary) == 0 || strlen(boundary) > 70) {
		*why = "bad boundary";
		return -1;
	}
	/* The first delimiter may open the body (no CRLF before it). */
	if ((size_t)(end - p) >= dl - 2 && memcmp(p, delim + 2, dl - 2) == 0) {
		p += dl - 2;
	} else {
		const unsigned char *d = memmem(p, (size_t)(end - p), delim, dl);
		if (!d) {
			*why = "no multipart boundary in the body";
			return -1;
		}
		p = d + dl;
	}
	for (;;) {
		/* After a delimiter: "--" ends the body, CRLF opens a part. */
		if (end - p >= 2 && p[0] == '-' && p[1] == '-')
			return 0;
		while (p < end && (*p == ' ' || *p == '\t'))
			p++;
		if (end - p < 2 || p[0] != '\r' || p[1] != '\n') {
			*why = "malformed multipart delimiter";
			return -1;
		}
		p += 2;
		const unsigned char *hend = memmem(p, (size_t)(end - p), "\r\n\r\n", 4);
		if (!hend || hend - p > 8192) {
			*why = "malformed or oversized part headers";
			return -1;
		}
		struct mp_part part;
		memset(&part, 0, sizeof(part));
		bool disposition = false;
		for (const unsigned char *line = p; line < hend + 2;) {
			const unsigned char *le = memmem(line, (size_t)(hend + 2 - line), "\r\n", 2);
			if (!le)
				break;
			if (le - line > 20 &&
			    strncasecmp((const char *)line, "content-disposition:", 20) == 0) {
				const char *h = (const char *)line + 20, *he = (const char *)le;
				while (h < he && *h == ' ')
					h++;
				if ((size_t)(he - h) < 9 || strncasecmp(h, "form-data", 9) != 0 ||
				    !disp_param(h, he, "name", part.name, sizeof(part.name)) ||
				    !disp_param(h, he, "filename", part.filename,
						sizeof(part.filename))) {
					*why = "malformed Content-Disposition";
					return -1;
				}
				disposition = true;
			}
			line = le + 2;
		}
		if (!disposition) {
			*why = "a part without Content-Disposition: form-data";
			return -1;
		}
		const unsigned char *data = hend + 4;
		const unsigned char *d = memmem(data, (size_t)(end - data), delim, dl);
		if (!d) {
			*why = "truncated multipart body (no closing boundary)";
			return -1;
		}
		part.data = data;
		part.len = (size_t)(d - data);
		int rc = cb(ctx, &part);
		if (rc)
			return rc;
		p = d + dl;
	}
}
