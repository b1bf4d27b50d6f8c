/* wspath.c: see wspath.h. */
#include "wspath.h"
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

int wspath_check(const char *p, int max_depth, const char **why)
{
	size_t len = strlen(p);
	int depth = 1;

	if (len == 0 || len > WSPATH_MAX) {
		*why = len ? "path too long" : "empty path";
		return -1;
	}
	if (p[0] == '/') {
		*why = "absolute path";
		return -1;
	}
	for (const char *c = p; *c; c++) {
		if ((unsigned char)*c < 0x20 || *c == 0x7f) {
			*why = "control character in path";
			return -1;
		}
		if (*c == '\\') {
			*why = "backslash in path";
			return -1;
		}
		if (*c == '/')
			depth++;
	}
	for (const char *s = p; s;) {
		const char *e = strchr(s, '/');
		size_t n = e ? (size_t)(e - s) : strlen(s);
		if (n == 0) {
			*why = "empty path segment";
			return -1;
		}
		if ((n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.')) {
			*why = n == 2 ? "path traversal (..)" : "'.' segment";
			return -1;
		}
		if (n > 255) {
			*why = "path segment too long";
			return -1;
		}
		s = e ? e + 1 : NULL;
	}
	if (depth > max_depth) {
		*why = "path too deep";
		return -1;
	}
	return 0;
}

int wspath_entry(const char *name, int max_depth, char *out, size_t outlen, bool *is_dir,
		 const char **why)
{
	size_t n = strlen(name), o = 0;

	*is_dir = n > 0 && name[n - 1] == '/';
	if (n == 0) {
		*why = "empty path";
		return -1;
	}
	if (name[0] == '/') {
		*why = "absolute path";
		return -1;
	}
	if (strchr(name, '\\')) {
		*why = "backslash in path";
		return -1;
	}
	for (const char *s = name; *s;) {
		const char *e = strchr(s, '/');
		size_t len = e ? (size_t)(e - s) : strlen(s);
		if (len == 2 && s[0] == '.' && s[1] == '.') {
			*why = "path traversal (..)";
			return -1;
		}
		if (len > 0 && !(len == 1 && s[0] == '.')) {
			if (o + len + 2 > outlen || o + len + 1 > WSPATH_MAX) {
				*why = "path too long";
				return -1;
			}
			if (o)
				out[o++] = '/';
			memcpy(out + o, s, len);
			o += len;
		}
		if (!e)
			break;
		s = e + 1;
	}
	out[o] = '\0';
	if (o == 0) {
		*why = "empty path";
		return -1;
	}
	return wspath_check(out, max_depth, why);
}


int wspath_from_url(const char *raw, int max_depth, char *out, size_t outlen,
		    const char **why)
{
	size_t o = 0;

	for (const char *c = raw; *c; c++) {
		int ch = (unsigned char)*c;
		if (ch == '%') {
			int h = hex_digit(c[1]), l = h < 0 ? -1 : hex_digit(c[2]);
			if (l < 0) {
				*why = "malformed percent-encoding";
				return -1;
			}
			ch = h * 16 + l;
			c += 2;
			if (ch == 0) {
				*why = "NUL byte in path";
				return -1;
			}
		}
		if (o + 1 >= outlen) {
			*why = "path too long";
			return -1;
		}
		out[o++] = (char)ch;
	}
	out[o] = '\0';
	/* %252e%252e → %2e%2e after one decoding: a second layer aimed at
	 * a decoder further down. */
	for (const char *c = out; (c = strchr(c, '%')); c++) {
		int h = hex_digit(c[1]), l = h < 0 ? -1 : hex_digit(c[2]);
		if (l >= 0) {
			int ch = h * 16 + l;
			if (ch == '.' || ch == '/' || ch == '\\' || ch == '%' || ch == 0) {
				*why = "double percent-encoding";
				return -1;
			}
		}
	}
	return wspath_check(out, max_depth, why);
}

void wspath_url_encode(const char *p, char *out, size_t outlen)
{
	static const char hx[] = "0123456789ABCDEF";
	size_t o = 0;

	for (const unsigned char *c = (const unsigned char *)p; *c && o + 4 < outlen; c++) {
		if ((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
		    (*c >= '0' && *c <= '9') || strchr("/-._~", *c)) {
			out[o++] = (char)*c;
		} else {
			out[o++] = '%';
			out[o++] = hx[*c >> 4];
			out[o++] = hx[*c & 15];
		}
	}
	out[o] = '\0';
}

int wspath_open(int dirfd, const char *rel, int flags, mode_t mode)
{
	struct open_how how = {
		.flags = (unsigned long long)(flags | O_CLOEXEC | O_NOFOLLOW),
		.mode = (flags & O_CREAT) ? mode : 0,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS |
			   RESOLVE_NO_XDEV,
	};
	int fd;

	do {
		fd = (int)syscall(SYS_openat2, dirfd, rel, &how, sizeof(how));
	} while (fd < 0 && errno == EAGAIN);
	return fd;
}

int wspath_parent(int dirfd, const char *rel, bool create, const char **leaf)
{
	const char *slash = strrchr(rel, '/');
	char dir[WSPATH_MAX + 1];

	if (!slash) {
		*leaf = rel;
		return wspath_open(dirfd, ".", O_RDONLY | O_DIRECTORY, 0);
	}
	*leaf = slash + 1;
	size_t n = (size_t)(slash - rel);
	if (n >= sizeof(dir)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	memcpy(dir, rel, n);
	dir[n] = '\0';
	int fd = wspath_open(dirfd, dir, O_RDONLY | O_DIRECTORY, 0);
	if (fd >= 0 || !create || errno != ENOENT)
		return fd;
	/* Create segment by segment, each through the previous one's fd. */
	int cur = wspath_open(dirfd, ".", O_RDONLY | O_DIRECTORY, 0);
	for (char *s = dir; cur >= 0 && s;) {
		char *e = strchr(s, '/');
		if (e)
			*e = '\0';
		if (mkdirat(cur, s, 0755) < 0 && errno != EEXIST) {
			close(cur);
			return -1;
		}
		int next = wspath_open(cur, s, O_RDONLY | O_DIRECTORY, 0);
		int saved = errno;
		close(cur);
		errno = saved;
		cur = next;
		s = e ? e + 1 : NULL;
	}
	return cur;
}

static int remove_tree(int parent, const char *name, int depth)
{
	struct stat st;

	if (depth > 256) { /* a tree a sandboxed program nested on purpose */
		errno = ELOOP;
		return -1;
	}
	if (fstatat(parent, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return -1;
	if (!S_ISDIR(st.st_mode))
		return unlinkat(parent, name, 0);
	int fd = wspath_open(parent, name, O_RDONLY | O_DIRECTORY, 0);
	if (fd < 0)
		return -1;
	DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return -1;
	}
	struct dirent *de;
	int rc = 0;
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (remove_tree(dirfd(d), de->d_name, depth + 1) < 0)
			rc = -1;
	}
	closedir(d);
	if (rc == 0)
		rc = unlinkat(parent, name, AT_REMOVEDIR);
	return rc;
}

int wspath_remove_tree(int dirfd, const char *name)
{
	return remove_tree(dirfd, name, 0);
}
