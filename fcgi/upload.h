/* upload.h: files into a session's workspace, all or nothing.
 *
 * Every upload is staged in a fresh directory on the session's own tmpfs
 * (so the workspace cap is the kernel's, and a move is a rename), checked
 * entry by entry (paths, types, modes, counts, depth, expanded bytes and
 * expansion ratio), and only when nothing was refused moved into the
 * workspace. The request body is the file nginx spooled
 * (client_body_in_file_only), never held in memory. */
#ifndef SANDBOX_API_UPLOAD_H
#define SANDBOX_API_UPLOAD_H

#include "request.h"

#include <stdint.h>

struct upload_result {
	int64_t bytes_received; /* the request body */
	int64_t bytes_written;  /* expanded into the workspace */
	int file_count;
};

/* POST /sessions/{id}/files: multipart/form-data, tar (plain, gzip,
 * bzip2, xz) or zip. */
void h_files_upload(struct request *r);

/* PUT one file from the raw body. 0, or -1 after having answered. */
int upload_single(struct request *r, int ws_fd, int root_fd, const char *path,
		  struct upload_result *res);

#endif
