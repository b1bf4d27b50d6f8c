/* stdin.c: interactive runs (spec 1.1). The sandbox's stdin is a pipe the
 * supervisor writes; WebSocket clients send {"type":"stdin"} and
 * {"type":"stdin_close"} frames, which reach the process in the order
 * they arrive. Limits per run: stdin_max_frame_bytes (one frame),
 * stdin_max_bytes (in total), stdin_bps (bytes in any one-second window)
 * and stdin_idle_timeout_sec (no input for that long). A violated limit
 * closes stdin and emits a `stdin_closed` event naming it; so does a
 * client's stdin_close (reason client_closed). Input the program has not
 * read yet waits in a buffer bounded by stdin_max_bytes, so the
 * supervisor never blocks on a full pipe. */
#include "supervisor.h"
#include "../lib/log.h"
#include "../lib/util.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/epoll.h>

static int64_t lim(struct run *r, const char *k, int64_t def)
{
	struct json_object *l = NULL, *v = NULL;
	if (json_object_object_get_ex(r->row, "stdin_limits", &l) && l &&
	    json_object_object_get_ex(l, k, &v) && v)
		return json_object_get_int64(v);
	return def;
}

int stdin_setup(struct run *r)
{
	struct json_object *v = NULL;
	int p[2];

	r->stdin_fd = -1;
	r->stdin_w.fd = -1;
	if (!json_object_object_get_ex(r->row, "interactive", &v) || !json_object_get_boolean(v))
		return -1;
	if (pipe2(p, O_CLOEXEC) < 0)
		return -1;
	(void)fcntl(p[1], F_SETFL, O_NONBLOCK);
	r->interactive = true;
	r->stdin_fd = p[1];
	r->stdin_max_bytes = lim(r, "stdin_max_bytes", 1048576);
	r->stdin_max_frame = lim(r, "stdin_max_frame_bytes", 65536);
	r->stdin_bps = lim(r, "stdin_bps", 65536);
	r->stdin_idle_ms = lim(r, "stdin_idle_timeout_sec", 30) * 1000;
	return p[0];
}

static void close_now(struct run *r, const char *reason)
{
	if (r->stdin_fd < 0)
		return;
	if (r->stdin_w.fd >= 0)
		loop_del(&r->stdin_w);
	close(r->stdin_fd);
	r->stdin_fd = r->stdin_w.fd = -1;
	free(r->stdin_buf);
	r->stdin_buf = NULL;
	r->stdin_len = 0;
	if (reason && !r->ended) {
		struct json_object *d = json_object_new_object();
		json_object_object_add(d, "reason", json_object_new_string(reason));
		frames_event(r, "stdin_closed", d);
		log_msg(LOG_LVL_INFO, run_fields(r), "stdin closed: %s", reason);
	}
}

static void flush_stdin(struct run *r);

static void on_writable(struct watch *w, uint32_t ev)
{
	(void)ev;
	flush_stdin(w->ctx);
}

static void flush_stdin(struct run *r)
{
	while (r->stdin_len > 0) {
		ssize_t n = write(r->stdin_fd, r->stdin_buf, r->stdin_len);
		if (n > 0) {
			memmove(r->stdin_buf, r->stdin_buf + n, r->stdin_len - (size_t)n);
			r->stdin_len -= (size_t)n;
			continue;
		}
		if (n < 0 && errno == EAGAIN) {
			if (r->stdin_w.fd < 0) {
				r->stdin_w.fd = r->stdin_fd;
				r->stdin_w.fn = on_writable;
				r->stdin_w.ctx = r;
				(void)loop_add(&r->stdin_w, EPOLLOUT);
			}
			return;
		}
		/* The program closed its stdin (EPIPE): nothing more to send. */
		close_now(r, "process_closed_stdin");
		return;
	}
	if (r->stdin_w.fd >= 0) {
		loop_del(&r->stdin_w);
		r->stdin_w.fd = -1;
	}
	if (r->stdin_closing)
		close_now(r, "client_closed");
}

static struct run *find(const char *run_id)
{
	for (struct run *r = sup->runs; r; r = r->next)
		if (strcmp(r->id, run_id) == 0 && !r->ended)
			return r;
	return NULL;
}

void run_stdin_data(const char *run_id, const unsigned char *data, size_t len)
{
	struct run *r = find(run_id);
	int64_t now = now_mono_ms();

	if (!r || r->stdin_fd < 0 || r->stdin_closing)
		return;
	if ((int64_t)len > r->stdin_max_frame) {
		close_now(r, "stdin_max_frame_bytes");
		return;
	}
	if (r->stdin_total + (int64_t)len > r->stdin_max_bytes) {
		close_now(r, "stdin_max_bytes");
		return;
	}
	if (now - r->stdin_window_start >= 1000) {
		r->stdin_window_start = now;
		r->stdin_window_bytes = 0;
	}
	if (r->stdin_window_bytes + (int64_t)len > r->stdin_bps) {
		close_now(r, "stdin_bps");
		return;
	}
	r->stdin_window_bytes += (int64_t)len;
	r->stdin_total += (int64_t)len;
	r->stdin_last = now;
	unsigned char *nb = realloc(r->stdin_buf, r->stdin_len + len + 1);
	if (!nb)
		abort();
	r->stdin_buf = nb;
	memcpy(r->stdin_buf + r->stdin_len, data, len);
	r->stdin_len += len;
	flush_stdin(r);
}

void run_stdin_close(const char *run_id)
{
	struct run *r = find(run_id);

	if (!r || r->stdin_fd < 0)
		return;
	r->stdin_closing = true;
	flush_stdin(r);
}

/* Every second: the idle timeout, counted from the start of the command
 * or the last input. */
void stdin_tick(struct run *r, int64_t now)
{
	if (r->stdin_fd < 0 || r->state != RS_RUNNING)
		return;
	int64_t since = r->stdin_last ? r->stdin_last : r->t_running;
	if (now - since >= r->stdin_idle_ms)
		close_now(r, "stdin_idle_timeout_sec");
}

/* The run ended: stdin closes with it, without an event. */
void stdin_release(struct run *r)
{
	close_now(r, NULL);
}
