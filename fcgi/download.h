/* download.h: files leave through nginx. The api decides who may read
 * what and the Content-Type (libmagic); it answers with X-Accel-Redirect to
 * an `internal` nginx location on the data root (disable_symlinks on,
 * Range, sendfile), and nginx moves the bytes. */
#ifndef SANDBOX_API_DOWNLOAD_H
#define SANDBOX_API_DOWNLOAD_H

#include "request.h"

/* The MIME type of an open regular file ("application/octet-stream"
 * when unknown). */
const char *download_content_type(int fd);

/* Answer with X-Accel-Redirect to `accel` (already URL-encoded), a
 * Content-Type from fd and an attachment named after the path's last
 * segment. */
void respond_download(struct request *r, int fd, const char *accel, const char *path);

/* A {path} capture of the URL (raw, percent-encoded) into a clean
 * workspace-relative path; -1 after a 400 naming the reason. */
int download_path(struct request *r, const char *raw, int max_depth, char *out,
		  size_t outlen);

#endif
