/* sessions.h: what the files and artifacts handlers need of a session. */
#ifndef SANDBOX_API_SESSIONS_H
#define SANDBOX_API_SESSIONS_H

#include "request.h"

/* The caller's live session `id`: 0 with its workspace directory open
 * (*ws_fd) and its tmpfs root (*root_fd, for staging and usage), or -1
 * after having answered (404 unknown/foreign/ended; 409 session_busy when
 * idle_only and a run of the session is active). Touches the session. */
int session_workspace(struct request *r, const char *id, bool idle_only, int *ws_fd,
		      int *root_fd);

/* Bytes used in the session's tmpfs (its cap is SANDBOX_WORKSPACE_CAP_MB). */
long long session_used_bytes(int root_fd);

/* 507 workspace_full with max_workspace_mb / current_workspace_mb. */
void respond_workspace_full(struct request *r, int root_fd);

#endif
