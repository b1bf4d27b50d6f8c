/* Checked parsers, ids and HMAC. */
#include "tap.h"
#include "../../lib/crypto.h"
#include "../../lib/util.h"

#include <string.h>

int main(void)
{
	int64_t v = 0;
	double d = 0;
	const char *why = NULL;
	char id[37], id2[37], mac[65], ts[32];

	ok(parse_i64("42", 0, 100, &v, &why) == 0 && v == 42, "plain integer");
	ok(parse_i64("", 0, 100, &v, &why) < 0, "empty refused");
	ok(parse_i64(" 4", 0, 100, &v, &why) < 0, "leading space refused");
	ok(parse_i64("4x", 0, 100, &v, &why) < 0, "trailing text refused");
	ok(parse_i64("101", 0, 100, &v, &why) < 0, "above max refused");
	ok(parse_i64("99999999999999999999", 0, INT64_MAX, &v, &why) < 0,
	   "overflow refused");
	ok(parse_double("0.75", 0, 1, &d, &why) == 0 && d == 0.75, "double");
	ok(parse_double("nan", 0, 1, &d, &why) < 0, "nan refused");

	uuid_v4(id);
	uuid_v4(id2);
	ok(uuid_valid(id) && id[14] == '4', "uuid v4 shape %s", id);
	ok(strcmp(id, id2) != 0, "two uuids differ");
	ok(!uuid_valid("not-a-uuid"), "garbage is not a uuid");

	/* RFC 4231 test case 2. */
	hmac_sha256_hex("Jefe", 4, "what do ya want for nothing?", 28, mac);
	ok(strcmp(mac, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843") == 0,
	   "HMAC-SHA256 RFC 4231 case 2");
	ok(secure_streq("abc", "abc") && !secure_streq("abc", "abd") &&
		   !secure_streq("abc", "abcd"), "constant-time compare");
	rfc3339_utc(0, ts);
	ok(strcmp(ts, "1970-01-01T00:00:00Z") == 0, "rfc3339 %s", ts);
	return done();
}
