-- 009: an index for every list the api serves (docs/operations.md shows
-- the plans; tests/integration/test_inspect.py checks none of them needs a
-- sequential scan).

-- /admin/runs: newest first, and each filter with its sort order.
CREATE INDEX runs_created_idx ON runs (created_at);
CREATE INDEX runs_phase_created_idx ON runs (phase, created_at);
CREATE INDEX runs_runtime_created_idx ON runs (runtime, created_at);
CREATE INDEX runs_base_image_created_idx ON runs (base_image, created_at);
CREATE INDEX runs_digest_created_idx ON runs (image_digest, created_at);
CREATE INDEX runs_node_created_idx ON runs (node_id, created_at);
CREATE INDEX runs_running_at_idx ON runs (running_at) WHERE running_at IS NOT NULL;
-- q: a substring of the image name or the message (trigram index).
CREATE EXTENSION IF NOT EXISTS pg_trgm;
CREATE INDEX runs_text_trgm_idx ON runs
    USING gin ((base_image || ' ' || coalesce(message, '')) gin_trgm_ops);
-- /admin/idempotency: newest first per endpoint.
CREATE INDEX idempotency_endpoint_created_idx ON idempotency (endpoint, created_at);
