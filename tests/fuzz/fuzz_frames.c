/* libFuzzer: program output → stream frames (runner/frames.c). The output
 * of a sandboxed program is hostile input. Property checked: decoding the
 * frames written gives back exactly the bytes fed in (up to the log cap),
 * whatever the bytes and however they are split into reads; every frame
 * is valid JSON with consecutive seq. */
#include "../../runner/supervisor.h"
#include "../../lib/config.h"
#include "../../lib/log.h"

#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct supervisor *sup;
/* frames.c hands each frame to the stream hub; here nobody listens. */
void streams_publish(const char *run_id, const char *line, size_t len, int64_t seq,
		     bool end)
{
	(void)run_id;
	(void)line;
	(void)len;
	(void)seq;
	(void)end;
}

/* Log fields of a run (lifecycle.c in the supervisor). */
struct json_object *run_fields(const struct run *r)
{
	return log_fields("run_id", r->id, NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int loaded;
	char err[256];
	struct run r;
	char path[] = "/tmp/fuzz-frames-XXXXXX";

	if (!loaded) {
		setenv("SANDBOX_MAX_LOG_BYTES", "65536", 1);
		if (cfg_load(NULL, err, sizeof(err)) < 0)
			abort();
		loaded = 1;
	}
	if (size < 1)
		return 0;
	memset(&r, 0, sizeof(r));
	r.out.type = "stdout";
	r.out.run = &r;
	r.log_fd = mkstemp(path);
	if (r.log_fd < 0)
		abort();
	/* The first byte chooses the read size: 1..256. */
	size_t chunk = (size_t)data[0] + 1, off = 1;
	while (off < size) {
		size_t n = size - off < chunk ? size - off : chunk;
		frames_output(&r, &r.out, data + off, n, false);
		off += n;
	}
	frames_output(&r, &r.out, NULL, 0, true);
	close(r.log_fd);

	/* Decode and compare. */
	FILE *f = fopen(path, "r");
	char *line = NULL;
	size_t cap = 0, got = 0;
	ssize_t len;
	int64_t seq = 0;
	unsigned char *out = malloc(size + 4);
	while ((len = getline(&line, &cap, f)) > 0) {
		struct json_object *o = json_tokener_parse(line), *t, *e, *d, *s;
		if (!o || !json_object_object_get_ex(o, "seq", &s) ||
		    json_object_get_int64(s) != ++seq)
			abort();
		json_object_object_get_ex(o, "type", &t);
		if (strcmp(json_object_get_string(t), "stdout") == 0) {
			json_object_object_get_ex(o, "encoding", &e);
			json_object_object_get_ex(o, "data", &d);
			const char *txt = json_object_get_string(d);
			size_t tl = (size_t)json_object_get_string_len(d);
			if (strcmp(json_object_get_string(e), "utf8") == 0) {
				if (got + tl > size)
					abort();
				memcpy(out + got, txt, tl);
				got += tl;
			} else {
				unsigned char *buf = malloc(tl / 4 * 3 + 4);
				int n = EVP_DecodeBlock(buf, (const unsigned char *)txt, (int)tl);
				while (tl > 0 && txt[tl - 1] == '=') {
					tl--;
					n--;
				}
				if (n < 0 || got + (size_t)n > size)
					abort();
				memcpy(out + got, buf, (size_t)n);
				got += (size_t)n;
				free(buf);
			}
		}
		json_object_put(o);
	}
	free(line);
	fclose(f);
	unlink(path);
	size_t want = size - 1 < 65536 ? size - 1 : 65536;
	if (got != want || memcmp(out, data + 1, want) != 0)
		abort();
	free(out);
	return 0;
}
