-- 003: recent finished runs (the api's start-time estimate, the reaper and
-- admin listings sort by finish time).
CREATE INDEX runs_finished_idx ON runs (finished_at DESC) WHERE finished_at IS NOT NULL;
