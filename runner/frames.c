/* frames.c: a run's recorded stream. Every frame of the PRD's WebSocket
 * protocol (stdout/stderr, events, truncated) gets the next `seq` of the
 * run and is appended as one JSON line to DATA_ROOT/runs/<id>/frames.jsonl,
 * which GET /runs/{id}/logs serves and streams replay.
 *
 * Output bytes become `utf8` frames when they are valid UTF-8 and `base64`
 * frames otherwise; an incomplete multi-byte sequence at the end of a read
 * is held back until the next read, so a character split across writes is
 * never mangled. The per-run log cap (SANDBOX_MAX_LOG_BYTES) counts output
 * bytes; at the cap one `truncated` frame is written and later output is
 * read and dropped, so the program never blocks on a full pipe. */
#include "supervisor.h"
#include "../lib/config.h"
#include "../lib/log.h"
#include "../lib/util.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <grp.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int frames_open(struct run *r)
{
	char path[600];
	struct group *g = getgrnam(cfg_str(CFG_API_USER));

	(void)snprintf(path, sizeof(path), "%s/frames.jsonl", r->dir);
	/* O_TRUNC: a run re-queued after a supervisor restart starts over. */
	r->log_fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0640);
	if (r->log_fd < 0)
		return -1;
	/* The api (group of SANDBOX_API_USER) reads it for GET /runs/{id}/logs. */
	if (g)
		(void)!fchown(r->log_fd, 0, g->gr_gid);
	r->seq = 0;
	return 0;
}

static void emit(struct run *r, struct json_object *frame)
{
	json_object_object_add(frame, "seq", json_object_new_int64(++r->seq));
	const char *s = json_object_to_json_string_ext(
		frame, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
	size_t n = strlen(s);
	char *line = xcalloc(1, n + 2);
	memcpy(line, s, n);
	line[n] = '\n';
	if (r->log_fd >= 0 && write(r->log_fd, line, n + 1) != (ssize_t)(n + 1))
		log_msg(LOG_LVL_ERROR, run_fields(r),
			"writing frames: %s", strerror(errno));
	struct json_object *ev = NULL;
	bool end = json_object_object_get_ex(frame, "event", &ev) &&
		   strcmp(json_object_get_string(ev), "end") == 0;
	streams_publish(r->id, line, n, r->seq, end);
	free(line);
	json_object_put(frame);
}

void frames_event(struct run *r, const char *event, struct json_object *data)
{
	struct json_object *f = json_object_new_object();

	json_object_object_add(f, "type", json_object_new_string("event"));
	json_object_object_add(f, "event", json_object_new_string(event));
	json_object_object_add(f, "data", data ? data : json_object_new_object());
	emit(r, f);
}

void frames_heartbeat(struct run *r)
{
	struct json_object *f = json_object_new_object();
	char ts[32];

	rfc3339_utc(time(NULL), ts);
	json_object_object_add(f, "type", json_object_new_string("heartbeat"));
	json_object_object_add(f, "ts", json_object_new_string(ts));
	emit(r, f);
}

/* Length of the longest prefix of buf that does not end inside a UTF-8
 * sequence (only the last 3 bytes are examined). */
static size_t complete_prefix(const unsigned char *b, size_t n)
{
	for (size_t back = 1; back <= 3 && back <= n; back++) {
		unsigned char c = b[n - back];
		if ((c & 0xC0) == 0x80)
			continue; /* continuation byte: keep looking for the lead */
		size_t need = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3
			      : (c & 0xF8) == 0xF0 ? 4 : 1;
		return need > back ? n - back : n;
	}
	return n;
}

static bool utf8_valid(const unsigned char *b, size_t n)
{
	size_t i = 0;

	while (i < n) {
		unsigned char c = b[i];
		size_t len;
		uint32_t cp;
		if (c < 0x80) {
			i++;
			continue;
		} else if ((c & 0xE0) == 0xC0) {
			len = 2;
			cp = c & 0x1F;
		} else if ((c & 0xF0) == 0xE0) {
			len = 3;
			cp = c & 0x0F;
		} else if ((c & 0xF8) == 0xF0) {
			len = 4;
			cp = c & 0x07;
		} else {
			return false;
		}
		if (i + len > n)
			return false;
		for (size_t k = 1; k < len; k++) {
			if ((b[i + k] & 0xC0) != 0x80)
				return false;
			cp = (cp << 6) | (b[i + k] & 0x3F);
		}
		/* No overlong forms, surrogates or values past U+10FFFF. */
		if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) ||
		    (len == 4 && cp < 0x10000) || cp > 0x10FFFF ||
		    (cp >= 0xD800 && cp <= 0xDFFF))
			return false;
		i += len;
	}
	return true;
}

static void emit_data(struct run *r, const char *type, const unsigned char *b,
		      size_t n)
{
	struct json_object *f = json_object_new_object();

	json_object_object_add(f, "type", json_object_new_string(type));
	if (utf8_valid(b, n)) {
		json_object_object_add(f, "encoding", json_object_new_string("utf8"));
		json_object_object_add(f, "data",
				       json_object_new_string_len((const char *)b, (int)n));
	} else {
		char *enc = xcalloc(1, 4 * ((n + 2) / 3) + 1);
		EVP_EncodeBlock((unsigned char *)enc, b, (int)n);
		json_object_object_add(f, "encoding", json_object_new_string("base64"));
		json_object_object_add(f, "data", json_object_new_string(enc));
		free(enc);
	}
	emit(r, f);
}

void frames_output(struct run *r, struct output *o, const unsigned char *buf,
		   size_t len, bool final)
{
	unsigned char chunk[8192 + 4];
	size_t n = 0, keep;
	int64_t cap = cfg_int(CFG_MAX_LOG_BYTES);

	if (r->truncated)
		return;
	memcpy(chunk, o->carry, o->ncarry);
	n = o->ncarry;
	if (len > sizeof(chunk) - n)
		len = sizeof(chunk) - n;
	if (len)
		memcpy(chunk + n, buf, len);
	n += len;
	o->ncarry = 0;
	keep = final ? n : complete_prefix(chunk, n);
	memcpy(o->carry, chunk + keep, n - keep);
	o->ncarry = n - keep;
	n = keep;
	if (n == 0)
		return;
	if (r->log_bytes + (int64_t)n > cap) {
		size_t room = (size_t)(cap - r->log_bytes);
		if (room > 0)
			emit_data(r, o->type, chunk, room);
		r->log_bytes += (int64_t)room;
		r->truncated = true;
		struct json_object *f = json_object_new_object();
		json_object_object_add(f, "type", json_object_new_string("truncated"));
		json_object_object_add(f, "reason", json_object_new_string("log_cap"));
		emit(r, f);
		log_msg(LOG_LVL_INFO, run_fields(r),
			"log cap of %lld bytes reached", (long long)cap);
		return;
	}
	r->log_bytes += (int64_t)n;
	emit_data(r, o->type, chunk, n);
}

void frames_append_end(const char *run_id, const char *phase, const char *reason,
		       const char *message)
{
	struct run tmp;
	char path[700], line[8192];
	FILE *f;
	int64_t last = 0;

	memset(&tmp, 0, sizeof(tmp));
	(void)strlcpy_ok(tmp.id, run_id, sizeof(tmp.id));
	(void)snprintf(tmp.dir, sizeof(tmp.dir), "%s/runs/%s", cfg_str(CFG_DATA_ROOT), run_id);
	(void)snprintf(path, sizeof(path), "%s/frames.jsonl", tmp.dir);
	/* Continue the sequence after the last recorded frame. */
	f = fopen(path, "re");
	if (f) {
		while (fgets(line, sizeof(line), f)) {
			const char *s = strstr(line, "\"seq\":");
			if (s)
				last = strtoll(s + 6, NULL, 10);
		}
		fclose(f);
	} else {
		char runs_dir[600];
		(void)snprintf(runs_dir, sizeof(runs_dir), "%s/runs", cfg_str(CFG_DATA_ROOT));
		(void)mkdir(cfg_str(CFG_DATA_ROOT), 0711);
		(void)mkdir(runs_dir, 0711);
		(void)mkdir(tmp.dir, 0750);
		struct group *g = getgrnam(cfg_str(CFG_API_USER));
		if (g)
			(void)!chown(tmp.dir, 0, g->gr_gid);
	}
	tmp.log_fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
	if (tmp.log_fd < 0)
		return;
	struct group *g = getgrnam(cfg_str(CFG_API_USER));
	if (g)
		(void)!fchown(tmp.log_fd, 0, g->gr_gid);
	tmp.seq = last;
	struct json_object *d = json_object_new_object();
	json_object_object_add(d, "exit_code", NULL);
	json_object_object_add(d, "phase", json_object_new_string(phase));
	json_object_object_add(d, "reason_code", json_object_new_string(reason));
	json_object_object_add(d, "message", json_object_new_string(message));
	frames_event(&tmp, "end", d);
	close(tmp.log_fd);
}
