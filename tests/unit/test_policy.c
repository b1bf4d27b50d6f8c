/* policy_hash against known answers computed independently with Python's
 * json.dumps(sort_keys=True, separators=(',', ':')) and hashlib.sha256. */
#include "tap.h"
#include "../../lib/config.h"
#include "../../lib/policy.h"
#include "../../lib/util.h"

#include <stdlib.h>
#include <string.h>

static const char defaults_json[] =
	"{\"SANDBOX_ARTIFACT_TTL_HOURS\":24,\"SANDBOX_BACKGROUND_EXECUTION\":true,"
	"\"SANDBOX_CANCEL_GRACE_SECONDS\":5,\"SANDBOX_DEFAULT_EXEC_TIMEOUT_SEC\":60,"
	"\"SANDBOX_DEFAULT_RUNTIME\":\"oci\",\"SANDBOX_DEFAULT_STARTUP_TIMEOUT_SEC\":20,"
	"\"SANDBOX_DOCKER_APPARMOR_PROFILE\":null,\"SANDBOX_DOCKER_SECCOMP\":null,"
	"\"SANDBOX_ENABLE_EXECUTION\":true,\"SANDBOX_MAX_ARTIFACT_BYTES_PER_RUN_MB\":32,"
	"\"SANDBOX_MAX_ARTIFACT_BYTES_PER_USER_MB\":128,\"SANDBOX_MAX_CPU\":4.0,"
	"\"SANDBOX_MAX_LOG_BYTES\":10485760,\"SANDBOX_MAX_MEM_MB\":8192,"
	"\"SANDBOX_MAX_UPLOAD_MB\":64,\"SANDBOX_NETWORK_DEFAULT\":\"deny_all\","
	"\"SANDBOX_PIDS_LIMIT\":256,\"SANDBOX_SUPPORTED_SPEC_VERSIONS\":[\"1.0\",\"1.1\"],"
	"\"SANDBOX_ULIMIT_NOFILE\":1024,\"SANDBOX_ULIMIT_NPROC\":512,"
	"\"SANDBOX_WORKSPACE_CAP_MB\":256}";


int main(void)
{
	char err[256], h[65], h2[65], repr[40];

	clear_env();
	ok(cfg_load(NULL, err, sizeof(err)) == 0, "defaults load");
	char *json = policy_canonical_json();
	ok(strcmp(json, defaults_json) == 0, "canonical JSON of the defaults");
	free(json);
	policy_hash_compute(h);
	ok(strcmp(h, "8f9ca7255384cd71fa95de2a333c97b63cb78770ec4197c19b3a42509e3d598a") == 0,
	   "policy_hash of the defaults matches the independent computation");

	ok(cfg_set("SANDBOX_WS_SIGNING_SECRET", "s3cret", err, sizeof(err)) == 0,
	   "secret set");
	ok(cfg_set("SANDBOX_WS_SYNTHETIC_FRAMES_FOR_TESTS", "true", err, sizeof(err)) == 0,
	   "test toggle set");
	ok(cfg_set("SANDBOX_API_WORKERS", "7", err, sizeof(err)) == 0,
	   "non-policy key set");
	policy_hash_compute(h2);
	ok(strcmp(h, h2) == 0, "secrets, test toggles and non-policy keys do not change it");
	json = policy_canonical_json();
	ok(strstr(json, "s3cret") == NULL, "the secret is not in the hash input");
	free(json);

	ok(cfg_set("SANDBOX_MAX_CPU", "0.75", err, sizeof(err)) == 0, "cpu set");
	ok(cfg_set("SANDBOX_SUPPORTED_SPEC_VERSIONS", "[\"1.0\",\"1.1\"]", err,
		   sizeof(err)) == 0, "spec versions set as a JSON list");
	policy_hash_compute(h2);
	ok(strcmp(h2, "9385c517e39195d3286533b200fae3aeb16c7d2cb5604bc6e602fc6b71c2d9f4") == 0,
	   "policy_hash after a change matches the independent computation");
	char c1[65], c2[65];
	policy_hash(c1);
	ok(cfg_set("SANDBOX_MAX_CPU", "1.5", err, sizeof(err)) == 0, "cpu changed again");
	policy_hash(c2);
	ok(strcmp(c1, c2) == 0 && strcmp(c1, h2) == 0, "policy_hash is computed once per process");

	json_double_repr(4.0, repr);
	ok(strcmp(repr, "4.0") == 0, "4.0 -> %s", repr);
	json_double_repr(0.1, repr);
	ok(strcmp(repr, "0.1") == 0, "0.1 -> %s", repr);
	json_double_repr(1e7, repr);
	ok(strcmp(repr, "10000000.0") == 0, "1e7 -> %s", repr);
	cfg_free();
	return done();
}
