-- 004: interactive runs (spec 1.1): stdin over the WebSocket, with limits.
ALTER TABLE runs
    ADD COLUMN interactive boolean NOT NULL DEFAULT false,
    ADD COLUMN stdin_limits jsonb;
