/* ws.h: RFC 6455 pieces for the stream hub. */
#ifndef SANDBOX_WS_H
#define SANDBOX_WS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define WS_OP_TEXT 1
#define WS_OP_BINARY 2
#define WS_OP_CLOSE 8
#define WS_OP_PING 9
#define WS_OP_PONG 10

struct ws_upgrade {
	char run_id[37];
	int64_t from_seq; /* 0: from the start */
	char key[32];
};

struct ws_frame {
	bool fin;
	int opcode;
	unsigned char *payload;
	size_t len;
};

/* The upgrade request (NUL-terminated, headers complete). 0 or -1. */
int ws_parse_upgrade(const char *req, size_t len, struct ws_upgrade *u);
void ws_accept_key(const char *key, char out[32]);
/* A server frame header (unmasked, FIN); returns its length. */
size_t ws_frame_header(unsigned char hdr[10], int opcode, size_t len);
int ws_parse_frame(unsigned char *buf, size_t len, size_t max_payload,
		   struct ws_frame *f, size_t *used);

#endif
