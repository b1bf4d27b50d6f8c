/* crypto.c: see crypto.h */
#include "crypto.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

void hex_encode(const unsigned char *in, size_t n, char *out)
{
	static const char digits[] = "0123456789abcdef";

	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digits[in[i] >> 4];
		out[2 * i + 1] = digits[in[i] & 15];
	}
	out[2 * n] = '\0';
}

void sha256_hex(const void *data, size_t len, char out[65])
{
	unsigned char md[32];
	unsigned int mdlen = 0;

	if (!EVP_Digest(data, len, md, &mdlen, EVP_sha256(), NULL) || mdlen != 32)
		abort();
	hex_encode(md, 32, out);
}

void hmac_sha256_hex(const void *key, size_t keylen, const void *data,
		     size_t len, char out[65])
{
	unsigned char md[32];
	unsigned int mdlen = 0;

	if (!HMAC(EVP_sha256(), key, (int)keylen, data, len, md, &mdlen) ||
	    mdlen != 32)
		abort();
	hex_encode(md, 32, out);
}

void random_bytes(void *buf, size_t n)
{
	unsigned char *p = buf;

	while (n > 0) {
		ssize_t r = getrandom(p, n, 0);
		if (r < 0)
			abort();
		p += r;
		n -= (size_t)r;
	}
}

void uuid_v4(char out[37])
{
	unsigned char b[16];

	random_bytes(b, sizeof(b));
	b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);
	b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);
	(void)snprintf(out, 37,
		       "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-"
		       "%02x%02x%02x%02x%02x%02x",
		       b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9],
		       b[10], b[11], b[12], b[13], b[14], b[15]);
}

bool uuid_valid(const char *s)
{
	for (int i = 0; i < 36; i++) {
		char c = s[i];
		if (i == 8 || i == 13 || i == 18 || i == 23) {
			if (c != '-')
				return false;
		} else if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') ||
			     (c >= 'A' && c <= 'F'))) {
			return false;
		}
	}
	return s[36] == '\0';
}

bool secure_streq(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);

	if (la != lb)
		return false;
	return CRYPTO_memcmp(a, b, la) == 0;
}
