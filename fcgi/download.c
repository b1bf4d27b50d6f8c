/* download.c: see download.h. */
#include "download.h"
#include "../lib/wspath.h"
#include "../lib/log.h"

#include <magic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static magic_t cookie;
static bool loaded;

const char *download_content_type(int fd)
{
	if (!loaded) {
		loaded = true;
		cookie = magic_open(MAGIC_MIME_TYPE | MAGIC_ERROR | MAGIC_NO_CHECK_COMPRESS);
		if (cookie && magic_load(cookie, NULL) < 0) {
			log_warn("libmagic: %s", magic_error(cookie));
			magic_close(cookie);
			cookie = NULL;
		}
	}
	const char *t = cookie ? magic_descriptor(cookie, fd) : NULL;
	(void)lseek(fd, 0, SEEK_SET);
	if (!t || !strchr(t, '/') || strcmp(t, "application/x-empty") == 0 || strlen(t) > 100)
		return "application/octet-stream";
	return t;
}

void respond_download(struct request *r, int fd, const char *accel, const char *path)
{
	const char *base = strrchr(path, '/');
	char ascii[256], enc[800];
	size_t o = 0;

	base = base ? base + 1 : path;
	/* The plain filename keeps printable ASCII only; filename* has it all. */
	for (const char *c = base; *c && o + 1 < sizeof(ascii); c++)
		ascii[o++] = (*c >= 0x20 && *c < 0x7f && *c != '"' && *c != '\\') ? *c : '_';
	ascii[o] = '\0';
	wspath_url_encode(base, enc, sizeof(enc));
	r->status = 200;
	FCGX_FPrintF(r->fcgx->out,
		     "Status: 200 OK\r\nContent-Type: %s\r\n"
		     "Content-Disposition: attachment; filename=\"%s\"; filename*=UTF-8''%s\r\n"
		     "Cache-Control: private, no-cache\r\n"
		     "X-Accel-Redirect: %s\r\n\r\n",
		     download_content_type(fd), ascii, enc, accel);
}

int download_path(struct request *r, const char *raw, int max_depth, char *out, size_t outlen)
{
	const char *why;

	if (wspath_from_url(raw, max_depth, out, outlen, &why) < 0) {
		struct json_object *d = json_object_new_object();
		json_object_object_add(d, "field", json_object_new_string("path"));
		json_object_object_add(d, "reason", json_object_new_string(why));
		respond_error(r, 400, "invalid_request", d, "invalid path: %s", why);
		return -1;
	}
	return 0;
}
