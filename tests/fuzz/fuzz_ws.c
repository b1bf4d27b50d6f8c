/* libFuzzer: the WebSocket upgrade request and client frames
 * (runner/ws.c), which come from anyone who reaches the stream. */
#include "../../runner/ws.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ws_upgrade u;
	char *req = malloc(size + 1);

	memcpy(req, data, size);
	req[size] = '\0';
	if (ws_parse_upgrade(req, strlen(req), &u) == 0) {
		if (strlen(u.run_id) != 36 || strlen(u.key) != 24 || u.from_seq < 0)
			abort();
	}
	free(req);

	unsigned char *buf = malloc(size ? size : 1);
	memcpy(buf, data, size);
	size_t off = 0;
	while (off < size) {
		struct ws_frame f;
		size_t used = 0;
		int rc = ws_parse_frame(buf + off, size - off, 65536, &f, &used);
		if (rc != 0)
			break;
		if (used == 0 || used > size - off || f.len > 65536 ||
		    f.payload + f.len > buf + size)
			abort();
		off += used;
	}
	free(buf);
	return 0;
}
