/* libFuzzer: query strings and config values, the parsers that take text
 * from outside. No crash, no overread (ASan), and decoded values never
 * longer than their input. */
#include "../../fcgi/request.h"
#include "../../lib/config.h"
#include "../../lib/util.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *names[] = { "from_seq", "a", "limit", "" };
	char *q = malloc(size + 1);
	struct request r;
	char err[256];

	memcpy(q, data, size);
	q[size] = '\0';
	memset(&r, 0, sizeof(r));
	r.query = q;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		char *v = req_query(&r, names[i]);
		if (v && strlen(v) > size)
			abort();
		free(v);
	}
	/* The same bytes as a value of every kind of configuration key. */
	static const char *keys[] = { "SANDBOX_MAX_CPU", "SANDBOX_QUEUE_TTL_SEC",
				      "SANDBOX_WS_SIGNED_URLS", "SANDBOX_DEFAULT_RUNTIME",
				      "SANDBOX_SUPPORTED_SPEC_VERSIONS" };
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		(void)cfg_set(keys[i], q, err, sizeof(err));
	int64_t v64;
	const char *why;
	(void)parse_i64(q, INT64_MIN, INT64_MAX, &v64, &why);
	free(q);
	return 0;
}
