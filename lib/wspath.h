/* wspath.h: paths a client names inside a workspace or a run's artifacts.
 * Every path is validated before any file is touched, and every file
 * operation resolves below a directory fd without following a symlink or
 * crossing a mount (openat2 RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
 * RESOLVE_NO_XDEV), so neither a crafted path nor a symlink a sandboxed
 * program planted can reach outside. */
#ifndef SANDBOX_API_WSPATH_H
#define SANDBOX_API_WSPATH_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define WSPATH_MAX 1024

/* A clean relative path: 1..WSPATH_MAX bytes, no NUL or control byte, no
 * backslash, not absolute, no empty, "." or ".." segment, at most
 * max_depth segments. 0, or -1 with *why. */
int wspath_check(const char *p, int max_depth, const char **why);

/* An archive entry name: "./" prefixes, "." segments, repeated and
 * trailing slashes are normalized away first (*is_dir when it ended in
 * "/"); then wspath_check. */
int wspath_entry(const char *name, int max_depth, char *out, size_t outlen, bool *is_dir,
		 const char **why);

/* The raw (still percent-encoded) path of a URL: decoded once; a second
 * level of encoding of '.', '/', '\' or '%' is refused, then wspath_check. */
int wspath_from_url(const char *raw, int max_depth, char *out, size_t outlen,
		    const char **why);

/* Percent-encode a clean path for a URL (segments kept). */
void wspath_url_encode(const char *p, char *out, size_t outlen);

/* openat2 below dirfd: no symlink, no mount crossing, no escape. */
int wspath_open(int dirfd, const char *rel, int flags, mode_t mode);

/* The directory holding rel's last segment, below dirfd (created, mode
 * 0755, when create is set); *leaf points into rel. -1 with errno
 * (ENOTDIR / ELOOP when a segment is a file or a symlink). */
int wspath_parent(int dirfd, const char *rel, bool create, const char **leaf);

/* rm -r below dirfd without following symlinks. */
int wspath_remove_tree(int dirfd, const char *name);

#endif
