/* policy.h: policy_hash exactly as the PRD's "Policy Hash" section says:
 * a JSON object of the CFG_POLICY keys with their effective values, keys
 * sorted, no whitespace, prefixed with "tldw.sandbox.policy:v1\n", SHA-256,
 * lowercase hex. */
#ifndef SANDBOX_POLICY_H
#define SANDBOX_POLICY_H

/* The canonical JSON text (without the prefix); caller frees. */
char *policy_canonical_json(void);
/* Cached after the first call: the configuration is fixed at start. */
void policy_hash(char out[65]);
/* Always computed from the current configuration. */
void policy_hash_compute(char out[65]);
/* Python-compatible shortest repr of a double ("4.0", "0.75"). */
void json_double_repr(double v, char out[40]);

#endif
