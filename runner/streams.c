/* streams.c: the WebSocket hub. The process that holds a run's pipes is
 * the one that streams them.
 *
 * nginx proxies an upgraded `GET /stream/<run_id>?from_seq=n` to the
 * supervisor's unix socket (SANDBOX_SUPERVISOR_SOCKET, 0660, group of the
 * api user) after sandbox-api has checked the caller's key or signed token
 * and ownership; nothing else can reach the socket.
 *
 * Every client first replays the run's recorded stream (frames.jsonl) from
 * from_seq, a bounded chunk at a time as its socket drains; once it has
 * read to the end of the file it is live and gets each new frame as the
 * run emits it. So all clients see the same frames in the same order, a
 * late client gets the whole history, and a slow client never slows the
 * run or anyone else: its queue is bounded (STREAM_QUEUE_MAX); a live
 * client a burst would overflow it goes back to catching up from the
 * record at its own pace (nothing is lost, memory stays bounded by the
 * replay chunk). After the `end` frame the server sends a close frame and
 * lets go of the connection.
 *
 * Clients of a run that has no frames yet (queued) wait and start
 * replaying as soon as the first frame is written. */
#include "supervisor.h"
#include "ws.h"
#include "../lib/config.h"
#include "../lib/log.h"
#include "../lib/util.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#define STREAM_QUEUE_MAX (1024 * 1024) /* bytes queued for one client */
#define STREAM_REPLAY_CHUNK (256 * 1024)
#define STREAM_MAX_CLIENTS 4096
#define HANDSHAKE_MAX 8192
#define CLIENT_FRAME_MAX 65536

enum cstate { C_HANDSHAKE, C_WAIT, C_REPLAY, C_LIVE, C_CLOSING };

struct client {
	struct watch w;
	enum cstate state;
	char run_id[37];
	char in[HANDSHAKE_MAX + CLIENT_FRAME_MAX + 16];
	size_t inlen;
	unsigned char *out;
	size_t outlen, outcap;
	bool want_out;
	int64_t next_seq;
	long file_off;
	int64_t deadline; /* mono ms; handshake and closing */
	struct client *next;
};

static struct watch listen_w = { .fd = -1 };
static struct client *clients;
static int nclients;
static struct stream_counters counters;

const struct stream_counters *streams_counters(void) { return &counters; }
int streams_clients(void) { return nclients; }

static void client_free(struct client *c, const char *why)
{
	for (struct client **pp = &clients; *pp; pp = &(*pp)->next) {
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	}
	nclients--;
	loop_del(&c->w);
	close(c->w.fd);
	if (c->state != C_HANDSHAKE)
		counters.disconnects++;
	log_msg(LOG_LVL_DEBUG, log_fields("run_id", c->run_id, "reason", why, NULL),
		"stream client closed");
	free(c->out);
	free(c);
}

static void set_out_interest(struct client *c, bool on)
{
	if (c->want_out == on)
		return;
	c->want_out = on;
	(void)loop_mod(&c->w, EPOLLIN | EPOLLRDHUP | (on ? EPOLLOUT : 0));
}

static void queue_bytes(struct client *c, const void *data, size_t len)
{
	if (c->outlen + len > c->outcap) {
		size_t cap = c->outcap ? c->outcap : 4096;
		while (cap < c->outlen + len)
			cap *= 2;
		unsigned char *n = realloc(c->out, cap);
		if (!n)
			abort();
		c->out = n;
		c->outcap = cap;
	}
	memcpy(c->out + c->outlen, data, len);
	c->outlen += len;
}

static void queue_frame(struct client *c, int opcode, const void *data, size_t len)
{
	unsigned char hdr[10];
	queue_bytes(c, hdr, ws_frame_header(hdr, opcode, len));
	queue_bytes(c, data, len);
}

static void start_closing(struct client *c, uint16_t code)
{
	unsigned char payload[2] = { (unsigned char)(code >> 8), (unsigned char)code };
	queue_frame(c, WS_OP_CLOSE, payload, 2);
	c->state = C_CLOSING;
	c->deadline = now_mono_ms() + 2000;
}

/* Send what is queued; false if the client is gone. */
static bool flush(struct client *c)
{
	while (c->outlen > 0) {
		ssize_t n = send(c->w.fd, c->out, c->outlen, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n > 0) {
			memmove(c->out, c->out + n, c->outlen - (size_t)n);
			c->outlen -= (size_t)n;
			continue;
		}
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			set_out_interest(c, true);
			return true;
		}
		return false;
	}
	set_out_interest(c, false);
	return true;
}

static int64_t line_seq(const char *line)
{
	const char *s = strstr(line, "\"seq\":");
	return s ? strtoll(s + 6, NULL, 10) : 0;
}

static bool is_end(const char *line)
{
	return strstr(line, "\"type\":\"event\",\"event\":\"end\"") != NULL;
}

/* A run of this supervisor still producing frames. */
static struct run *local_run(const char *id)
{
	struct run *r = run_local(id);
	return r && !r->ended ? r : NULL;
}

/* The last seq recorded for a run: the live counter, or the file's tail. */
static int64_t last_seq(const char *run_id, const char *path)
{
	struct run *r = local_run(run_id);
	if (r)
		return r->seq;
	FILE *f = fopen(path, "re");
	if (!f)
		return 0;
	char buf[4096];
	int64_t last = 0;
	long size;
	if (fseek(f, 0, SEEK_END) == 0 && (size = ftell(f)) > 0) {
		(void)fseek(f, size > (long)sizeof(buf) - 1 ? size - (long)sizeof(buf) + 1 : 0,
			    SEEK_SET);
		size_t n = fread(buf, 1, sizeof(buf) - 1, f);
		buf[n] = '\0';
		char *s = buf, *hit;
		while ((hit = strstr(s, "\"seq\":")) != NULL) {
			last = strtoll(hit + 6, NULL, 10);
			s = hit + 6;
		}
	}
	fclose(f);
	return last;
}

/* A client asking for frames older than the replay budget
 * (SANDBOX_WS_REPLAY_MAX_FRAMES) starts at the oldest retained one, told
 * so by a `resume` event first (PRD "Resume from sequence"). */
static void resume_note(struct client *c, const char *path)
{
	int64_t last = last_seq(c->run_id, path);
	int64_t first = last - cfg_int(CFG_WS_REPLAY_MAX_FRAMES) + 1;

	if (first <= 1 || c->next_seq >= first)
		return;
	char msg[256];
	int n = snprintf(msg, sizeof(msg),
			 "{\"type\":\"event\",\"event\":\"resume\",\"data\":"
			 "{\"requested_from_seq\":%lld,\"delivered_from_seq\":%lld,"
			 "\"lost_count\":%lld},\"seq\":%lld}",
			 (long long)c->next_seq, (long long)first,
			 (long long)(first - c->next_seq), (long long)first);
	queue_frame(c, WS_OP_TEXT, msg, (size_t)n);
	c->next_seq = first;
}

/* Replay from the file until the queue is full or the file ends. */
static void replay(struct client *c)
{
	char path[700];
	FILE *f;

	(void)snprintf(path, sizeof(path), "%s/runs/%s/frames.jsonl",
		       cfg_str(CFG_DATA_ROOT), c->run_id);
	f = fopen(path, "re");
	if (!f) {
		c->state = C_WAIT;
		return;
	}
	if (c->file_off == 0)
		resume_note(c, path);
	if (fseek(f, c->file_off, SEEK_SET) < 0) {
		fclose(f);
		return;
	}
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	bool ended = false;
	while (c->outlen < STREAM_REPLAY_CHUNK && (n = getline(&line, &cap, f)) > 0) {
		if (line[n - 1] != '\n')
			break; /* a frame being written: read it next time */
		c->file_off += (long)n;
		int64_t seq = line_seq(line);
		if (seq < c->next_seq)
			continue;
		queue_frame(c, WS_OP_TEXT, line, (size_t)n - 1);
		c->next_seq = seq + 1;
		if (is_end(line))
			ended = true;
	}
	free(line);
	bool at_eof = feof(f);
	fclose(f);
	if (ended) {
		start_closing(c, 1000);
		return;
	}
	if (at_eof || c->outlen < STREAM_REPLAY_CHUNK) {
		/* Caught up: live if this supervisor runs it, else wait for
		 * the next frame to be written. */
		c->state = local_run(c->run_id) ? C_LIVE : C_WAIT;
	}
}

static void on_client(struct watch *w, uint32_t ev);

/* false when the client was refused (and freed). */
static bool handshake(struct client *c)
{
	struct ws_upgrade u;
	char *end = memmem(c->in, c->inlen, "\r\n\r\n", 4);

	if (!end) {
		if (c->inlen >= HANDSHAKE_MAX)
			goto bad;
		return true;
	}
	size_t hlen = (size_t)(end - c->in) + 4;
	char save = c->in[hlen];
	c->in[hlen] = '\0';
	int rc = ws_parse_upgrade(c->in, hlen, &u);
	c->in[hlen] = save;
	if (rc < 0)
		goto bad;
	memmove(c->in, c->in + hlen, c->inlen - hlen);
	c->inlen -= hlen;
	char accept[32], resp[256];
	ws_accept_key(u.key, accept);
	int len = snprintf(resp, sizeof(resp),
			   "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
			   "Connection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n",
			   accept);
	queue_bytes(c, resp, (size_t)len);
	memcpy(c->run_id, u.run_id, sizeof(c->run_id));
	c->next_seq = u.from_seq > 0 ? u.from_seq : 1;
	c->state = C_REPLAY;
	c->deadline = 0;
	counters.opened++;
	log_msg(LOG_LVL_DEBUG, log_fields("run_id", c->run_id, NULL), "stream client attached");
	replay(c);
	return true;
bad:;
	static const char r400[] = "HTTP/1.1 400 Bad Request\r\nConnection: close\r\n"
				   "Content-Length: 0\r\n\r\n";
	queue_bytes(c, r400, sizeof(r400) - 1);
	(void)flush(c);
	client_free(c, "bad handshake");
	return false;
}

/* {"type":"stdin","encoding":"utf8"|"base64","data":"..."} and
 * {"type":"stdin_close"} from a client of an interactive run. Anything
 * else is ignored. */
static void client_text(struct client *c, const unsigned char *p, size_t n)
{
	struct json_tokener *tok = json_tokener_new_ex(4);
	struct json_object *o = json_tokener_parse_ex(tok, (const char *)p, (int)n);
	struct json_object *t = NULL, *e = NULL, *d = NULL;

	json_tokener_free(tok);
	if (!o || !json_object_object_get_ex(o, "type", &t))
		goto out;
	if (strcmp(json_object_get_string(t), "stdin_close") == 0) {
		run_stdin_close(c->run_id);
		goto out;
	}
	if (strcmp(json_object_get_string(t), "stdin") != 0 ||
	    !json_object_object_get_ex(o, "data", &d) || !json_object_is_type(d, json_type_string))
		goto out;
	json_object_object_get_ex(o, "encoding", &e);
	const char *data = json_object_get_string(d);
	size_t len = (size_t)json_object_get_string_len(d);
	if (e && strcmp(json_object_get_string(e), "base64") == 0) {
		unsigned char *buf = malloc(len / 4 * 3 + 4);
		int dl = EVP_DecodeBlock(buf, (const unsigned char *)data, (int)len);
		while (dl > 0 && len > 0 && data[len - 1] == '=') {
			len--;
			dl--;
		}
		if (dl >= 0)
			run_stdin_data(c->run_id, buf, (size_t)dl);
		free(buf);
	} else {
		run_stdin_data(c->run_id, (const unsigned char *)data, len);
	}
out:
	json_object_put(o);
}

static bool client_frames(struct client *c)
{
	for (;;) {
		struct ws_frame f;
		size_t used = 0;
		int rc = ws_parse_frame((unsigned char *)c->in, c->inlen, CLIENT_FRAME_MAX,
				       &f, &used);
		if (rc == 1)
			return true;
		if (rc < 0) {
			start_closing(c, 1002); /* protocol error */
			c->inlen = 0;
			return true;
		}
		if (f.opcode == WS_OP_PING)
			queue_frame(c, WS_OP_PONG, f.payload, f.len);
		else if (f.opcode == WS_OP_CLOSE) {
			if (c->state != C_CLOSING)
				start_closing(c, 1000);
			c->inlen = 0;
			return false; /* the peer is done; flush and go */
		}
		if (f.opcode == WS_OP_TEXT)
			client_text(c, f.payload, f.len);
		memmove(c->in, c->in + used, c->inlen - used);
		c->inlen -= used;
	}
}

static void on_client(struct watch *w, uint32_t ev)
{
	struct client *c = w->ctx;

	if (ev & EPOLLIN) {
		ssize_t n = recv(w->fd, c->in + c->inlen, sizeof(c->in) - c->inlen - 1, 0);
		if (n <= 0 && !(n < 0 && errno == EAGAIN)) {
			client_free(c, "peer closed");
			return;
		}
		if (n > 0) {
			c->inlen += (size_t)n;
			if (c->state == C_HANDSHAKE) {
				if (!handshake(c) || c->state == C_HANDSHAKE)
					return;
			} else if (!client_frames(c)) {
				(void)flush(c);
				client_free(c, "peer sent close");
				return;
			}
		}
	} else if (ev & (EPOLLHUP | EPOLLERR | EPOLLRDHUP)) {
		client_free(c, "hangup");
		return;
	}
	if (c->state == C_REPLAY && c->outlen < STREAM_REPLAY_CHUNK)
		replay(c);
	if (!flush(c)) {
		client_free(c, "send failed");
		return;
	}
	/* Closing: the peer answers our close frame with its own, then we
	 * let go (client_frames); streams_tick ends a peer that never does. */
}

static void on_listen(struct watch *w, uint32_t ev)
{
	(void)ev;
	for (;;) {
		int fd = accept4(w->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			return;
		if (nclients >= STREAM_MAX_CLIENTS) {
			close(fd);
			counters.drops++;
			continue;
		}
		struct client *c = xcalloc(1, sizeof(*c));
		c->w.fd = fd;
		c->w.fn = on_client;
		c->w.ctx = c;
		c->state = C_HANDSHAKE;
		c->deadline = now_mono_ms() + 5000;
		c->next = clients;
		clients = c;
		nclients++;
		(void)loop_add(&c->w, EPOLLIN | EPOLLRDHUP);
	}
}

int streams_listen(void)
{
	const char *path = cfg_str(CFG_SUPERVISOR_SOCKET);
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	struct stat st;

	if (strlen(path) >= sizeof(a.sun_path)) {
		log_error("SANDBOX_SUPERVISOR_SOCKET too long");
		return -1;
	}
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			log_error("%s exists and is not a socket", path);
			return -1;
		}
		(void)unlink(path);
	}
	strcpy(a.sun_path, path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 512) < 0) {
		log_error("stream socket %s: %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	/* nginx workers (the api user's group) connect; nobody else. */
	struct group *g = getgrnam(cfg_str(CFG_API_USER));
	(void)!chown(path, 0, g ? g->gr_gid : 0);
	(void)chmod(path, 0660);
	listen_w.fd = fd;
	listen_w.fn = on_listen;
	return loop_add(&listen_w, EPOLLIN);
}

/* A frame was appended to a run's stream: live clients get it now,
 * waiting ones start replaying. */
void streams_publish(const char *run_id, const char *line, size_t len, int64_t seq,
		     bool end)
{
	for (struct client *c = clients, *next; c; c = next) {
		next = c->next;
		if (strcmp(c->run_id, run_id) != 0)
			continue;
		if (c->state == C_WAIT) {
			c->state = C_REPLAY;
			replay(c);
		} else if (c->state == C_LIVE && seq == c->next_seq) {
			if (c->outlen + len > STREAM_QUEUE_MAX) {
				/* Behind by a burst: no frame is lost, the client
				 * catches up from the recorded stream at its own
				 * pace (memory stays bounded by the replay chunk). */
				c->state = C_REPLAY;
				counters.drops++;
				log_msg(LOG_LVL_DEBUG, log_fields("run_id", run_id, NULL),
					"stream client behind: catching up from the record");
			} else {
				queue_frame(c, WS_OP_TEXT, line, len);
				c->next_seq = seq + 1;
				if (end)
					start_closing(c, 1000);
			}
		} else {
			continue;
		}
		if (!flush(c))
			client_free(c, "send failed");
	}
}

/* Every second: heartbeats of active runs, client timeouts. */
void streams_tick(void)
{
	int64_t now = now_mono_ms();

	for (struct run *r = sup->runs; r; r = r->next) {
		if (r->ended || r->log_fd < 0)
			continue;
		if (!r->last_heartbeat)
			r->last_heartbeat = now;
		stdin_tick(r, now);
		if (now - r->last_heartbeat >= 10000) {
			r->last_heartbeat = now;
			frames_heartbeat(r);
			counters.heartbeats++;
		}
	}
	for (struct client *c = clients, *next; c; c = next) {
		next = c->next;
		if (c->state == C_HANDSHAKE && now > c->deadline)
			client_free(c, "handshake timeout");
		/* Closing: once everything queued is sent and the peer had 2 s
		 * to answer the close; a peer that reads nothing gets 60 s. */
		else if (c->state == C_CLOSING &&
			 ((c->outlen == 0 && now > c->deadline) || now > c->deadline + 60000))
			client_free(c, "closed");
		else if (c->state == C_WAIT)
			replay(c); /* a run of another process may have ended */
	}
}
