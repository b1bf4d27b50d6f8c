-- 010: one row per histogram series (bucket counts in an array) instead of
-- a row per bucket: a run's three observations are three upserts, not
-- forty-eight. The bounds (seconds) are fixed here and in fcgi/metrics.c.

CREATE TABLE metric_hist (
    name    text NOT NULL,
    labels  jsonb NOT NULL DEFAULT '{}',
    counts  bigint[] NOT NULL,  -- cumulative: observations <= each bound
    sum     double precision NOT NULL DEFAULT 0,
    count   bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (name, labels)
);

CREATE OR REPLACE FUNCTION metric_observe(n text, l jsonb, v double precision) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF v IS NULL OR v < 0 THEN
        RETURN;
    END IF;
    INSERT INTO metric_hist AS h (name, labels, counts, sum, count)
    SELECT n, l, array_agg(CASE WHEN v <= b THEN 1 ELSE 0 END ORDER BY i), v, 1
    FROM unnest(ARRAY[0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 3600]::float8[])
         WITH ORDINALITY AS t(b, i)
    ON CONFLICT (name, labels) DO UPDATE SET
        counts = (SELECT array_agg(x + y ORDER BY i)
                  FROM unnest(h.counts, EXCLUDED.counts) WITH ORDINALITY AS u(x, y, i)),
        sum = h.sum + EXCLUDED.sum,
        count = h.count + 1;
END $$;

-- What 008 kept per bucket moves over (cumulative counts per bound).
INSERT INTO metric_hist (name, labels, counts, sum, count)
SELECT base, lbl,
       (SELECT array_agg(coalesce((SELECT c.value FROM metric_counters c
                 WHERE c.name = base || '_bucket' AND c.labels = lbl || jsonb_build_object('le', b::text)), 0)::bigint
               ORDER BY i)
        FROM unnest(ARRAY[0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 3600]::float8[])
             WITH ORDINALITY AS t(b, i)),
       coalesce((SELECT c.value FROM metric_counters c WHERE c.name = base || '_sum' AND c.labels = lbl), 0),
       coalesce((SELECT c.value FROM metric_counters c WHERE c.name = base || '_count' AND c.labels = lbl), 0)::bigint
FROM (SELECT DISTINCT left(name, length(name) - 6) AS base, labels AS lbl
      FROM metric_counters WHERE name LIKE '%\_count') s
ON CONFLICT DO NOTHING;
DELETE FROM metric_counters
WHERE name LIKE '%\_seconds\_bucket' OR name LIKE '%\_seconds\_sum' OR name LIKE '%\_seconds\_count';
