/* ws.c: the WebSocket protocol (RFC 6455) as pure functions over buffers:
 * the upgrade request, the handshake answer, and frames. The supervisor's
 * stream hub (streams.c) does the I/O. Client input is untrusted and every
 * parser here is bounded and fuzzed (tests/fuzz/fuzz_ws.c). */
#include "ws.h"
#include "../lib/util.h"

#include <ctype.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

static const char *header_value(const char *req, const char *name, char *out,
				size_t outlen)
{
	size_t nlen = strlen(name);
	const char *p = strstr(req, "\r\n");

	while (p && p[2] != '\r') {
		const char *line = p + 2, *end = strstr(line, "\r\n");
		if (!end)
			return NULL;
		if ((size_t)(end - line) > nlen && strncasecmp(line, name, nlen) == 0 &&
		    line[nlen] == ':') {
			const char *v = line + nlen + 1;
			while (v < end && (*v == ' ' || *v == '\t'))
				v++;
			size_t vl = (size_t)(end - v);
			while (vl > 0 && (v[vl - 1] == ' ' || v[vl - 1] == '\t'))
				vl--;
			if (vl >= outlen)
				return NULL;
			memcpy(out, v, vl);
			out[vl] = '\0';
			return out;
		}
		p = end;
	}
	return NULL;
}

/* "GET /stream/<uuid>?from_seq=N HTTP/1.1" plus the upgrade headers. */
int ws_parse_upgrade(const char *req, size_t len, struct ws_upgrade *u)
{
	char up[64], conn[128], ver[8];

	memset(u, 0, sizeof(*u));
	if (len < 16 || !memmem(req, len, "\r\n\r\n", 4) || strlen(req) != len)
		return -1;
	if (strncmp(req, "GET /stream/", 12) != 0)
		return -1;
	const char *id = req + 12;
	size_t idlen = strspn(id, "0123456789abcdef-");
	if (idlen != 36)
		return -1;
	memcpy(u->run_id, id, 36);
	u->run_id[36] = '\0';
	const char *rest = id + 36;
	u->from_seq = 0;
	if (*rest == '?') {
		rest++;
		if (strncmp(rest, "from_seq=", 9) != 0)
			return -1;
		rest += 9;
		int64_t v = 0;
		size_t digits = 0;
		while (isdigit((unsigned char)rest[digits]) && digits < 18) {
			v = v * 10 + (rest[digits] - '0');
			digits++;
		}
		if (digits == 0)
			return -1;
		u->from_seq = v;
		rest += digits;
	}
	if (strncmp(rest, " HTTP/1.1\r\n", 11) != 0)
		return -1;
	if (!header_value(req, "Upgrade", up, sizeof(up)) || strcasecmp(up, "websocket") != 0)
		return -1;
	if (!header_value(req, "Connection", conn, sizeof(conn)) || !strcasestr(conn, "upgrade"))
		return -1;
	if (!header_value(req, "Sec-WebSocket-Version", ver, sizeof(ver)) ||
	    strcmp(ver, "13") != 0)
		return -1;
	if (!header_value(req, "Sec-WebSocket-Key", u->key, sizeof(u->key)) ||
	    strlen(u->key) != 24)
		return -1;
	return 0;
}

void ws_accept_key(const char *key, char out[32])
{
	static const char guid[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
	unsigned char md[20];
	char buf[64];
	unsigned int mdlen = 0;

	(void)snprintf(buf, sizeof(buf), "%s%s", key, guid);
	EVP_Digest(buf, strlen(buf), md, &mdlen, EVP_sha1(), NULL);
	EVP_EncodeBlock((unsigned char *)out, md, 20);
}

size_t ws_frame_header(unsigned char hdr[10], int opcode, size_t len)
{
	hdr[0] = (unsigned char)(0x80 | (opcode & 0x0f));
	if (len < 126) {
		hdr[1] = (unsigned char)len;
		return 2;
	}
	if (len <= 0xffff) {
		hdr[1] = 126;
		hdr[2] = (unsigned char)(len >> 8);
		hdr[3] = (unsigned char)len;
		return 4;
	}
	hdr[1] = 127;
	for (int i = 0; i < 8; i++)
		hdr[2 + i] = (unsigned char)((uint64_t)len >> (56 - 8 * i));
	return 10;
}

/* One complete client frame at the start of buf: 0 and *used when one is
 * there (payload unmasked in place), 1 when more bytes are needed, -1 on a
 * protocol violation (unmasked, fragmented control, too large, bad
 * opcode). */
int ws_parse_frame(unsigned char *buf, size_t len, size_t max_payload,
		   struct ws_frame *f, size_t *used)
{
	size_t pos = 2;
	uint64_t plen;

	if (len < 2)
		return 1;
	f->fin = (buf[0] & 0x80) != 0;
	f->opcode = buf[0] & 0x0f;
	if (buf[0] & 0x70)
		return -1; /* no extensions were negotiated */
	if (!(buf[1] & 0x80))
		return -1; /* clients must mask */
	plen = buf[1] & 0x7f;
	if (plen == 126) {
		if (len < 4)
			return 1;
		plen = ((uint64_t)buf[2] << 8) | buf[3];
		pos = 4;
	} else if (plen == 127) {
		if (len < 10)
			return 1;
		plen = 0;
		for (int i = 0; i < 8; i++)
			plen = (plen << 8) | buf[2 + i];
		pos = 10;
	}
	bool control = f->opcode & 0x08;
	if (control && (plen > 125 || !f->fin))
		return -1;
	if (!(f->opcode <= 2 || (f->opcode >= 8 && f->opcode <= 10)))
		return -1;
	if (plen > max_payload)
		return -1;
	if (len < pos + 4)
		return 1;
	const unsigned char *mask = buf + pos;
	pos += 4;
	if (len - pos < plen)
		return 1;
	f->payload = buf + pos;
	f->len = (size_t)plen;
	for (size_t i = 0; i < f->len; i++)
		f->payload[i] ^= mask[i % 4];
	*used = pos + f->len;
	return 0;
}
