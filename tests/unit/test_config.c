/* Configuration: defaults, file, environment, and the errors that stop a
 * process from starting. */
#include "tap.h"
#include "../../lib/config.h"
#include "../../lib/util.h"

#include <stdlib.h>
#include <fcntl.h>
#include <string.h>


int main(void)
{
	char err[512], path[] = "/tmp/sandbox-cfg-XXXXXX";
	const char *const *items;

	clear_env();
	ok(cfg_load(NULL, err, sizeof(err)) == 0, "defaults load");
	ok(cfg_int(CFG_MAX_LOG_BYTES) == 10485760, "max_log_bytes default");
	ok(cfg_int(CFG_QUEUE_MAX_LENGTH) == 100, "queue_max_length default");
	ok(cfg_float(CFG_MAX_CPU) == 4.0, "max_cpu default");
	ok(strcmp(cfg_str(CFG_DEFAULT_RUNTIME), "oci") == 0, "default runtime oci");
	ok(cfg_list(CFG_SUPPORTED_SPEC_VERSIONS, &items) == 2 &&
		   strcmp(items[0], "1.0") == 0 && strcmp(items[1], "1.1") == 0,
	   "spec versions default [1.0, 1.1]");

	setenv("SANDBOX_NO_SUCH_KEY", "1", 1);
	ok(cfg_load(NULL, err, sizeof(err)) < 0 && strstr(err, "SANDBOX_NO_SUCH_KEY"),
	   "unknown environment key refused, named: %s", err);
	unsetenv("SANDBOX_NO_SUCH_KEY");

	setenv("SANDBOX_MAX_CPU", "9999", 1);
	ok(cfg_load(NULL, err, sizeof(err)) < 0 && strstr(err, "SANDBOX_MAX_CPU"),
	   "out-of-range float refused, named: %s", err);
	setenv("SANDBOX_MAX_CPU", "2.5", 1);
	ok(cfg_load(NULL, err, sizeof(err)) == 0 && cfg_float(CFG_MAX_CPU) == 2.5,
	   "environment value taken");
	unsetenv("SANDBOX_MAX_CPU");

	setenv("SANDBOX_QUEUE_TTL_SEC", "12abc", 1);
	ok(cfg_load(NULL, err, sizeof(err)) < 0 && strstr(err, "SANDBOX_QUEUE_TTL_SEC"),
	   "trailing garbage refused: %s", err);
	setenv("SANDBOX_QUEUE_TTL_SEC", "0", 1);
	ok(cfg_load(NULL, err, sizeof(err)) < 0, "below minimum refused: %s", err);
	unsetenv("SANDBOX_QUEUE_TTL_SEC");

	setenv("SANDBOX_DEFAULT_RUNTIME", "kvm", 1);
	ok(cfg_load(NULL, err, sizeof(err)) < 0 && strstr(err, "oci|docker|firecracker"),
	   "bad enum refused with the choices: %s", err);
	unsetenv("SANDBOX_DEFAULT_RUNTIME");

	setenv("SANDBOX_WS_SIGNED_URLS", "maybe", 1);
	ok(cfg_load(NULL, err, sizeof(err)) < 0, "bad boolean refused: %s", err);
	unsetenv("SANDBOX_WS_SIGNED_URLS");

	int fd = mkstemp(path);
	const char *text = "# comment\n\nSANDBOX_QUEUE_MAX_LENGTH = 7\n"
			   "SANDBOX_SUPPORTED_SPEC_VERSIONS = 1.0, 1.1\n"
			   "SANDBOX_HEARTBEAT_SEC=2\n";
	ok(fd >= 0 && write(fd, text, strlen(text)) == (ssize_t)strlen(text),
	   "config file written");
	close(fd);
	setenv("SANDBOX_HEARTBEAT_SEC", "3", 1);
	ok(cfg_load(path, err, sizeof(err)) == 0, "config file loads: %s", err);
	ok(cfg_int(CFG_QUEUE_MAX_LENGTH) == 7, "file value taken");
	ok(cfg_list(CFG_SUPPORTED_SPEC_VERSIONS, &items) == 2 &&
		   strcmp(items[1], "1.1") == 0, "comma list parsed");
	ok(cfg_int(CFG_HEARTBEAT_SEC) == 3, "environment overrides the file");
	unsetenv("SANDBOX_HEARTBEAT_SEC");

	fd = open(path, O_WRONLY | O_TRUNC);
	text = "SANDBOX_QUEUE_MAX_LENGTH = 7\nSANDBOX_BOGUS = 1\n";
	ok(write(fd, text, strlen(text)) == (ssize_t)strlen(text), "rewritten");
	close(fd);
	ok(cfg_load(path, err, sizeof(err)) < 0 && strstr(err, "SANDBOX_BOGUS") &&
		   strstr(err, ":2:"),
	   "unknown key in the file refused with file and line: %s", err);
	unlink(path);
	ok(cfg_load("/nonexistent/sandbox.conf", err, sizeof(err)) < 0,
	   "missing config file refused: %s", err);
	cfg_free();
	return done();
}
