/*
 * sandbox-init: PID 1 inside every sandbox.
 *
 * A small static binary bind-mounted read-only at /.sandbox-init. With
 * --probe it only proves that a container can start here (the
 * supervisor's runtime probe) and exits 0.
 */
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
	if (argc == 2 && strcmp(argv[1], "--probe") == 0) {
		puts("sandbox-init probe ok");
		return 0;
	}
	fprintf(stderr, "usage: sandbox-init --probe\n");
	return 2;
}
