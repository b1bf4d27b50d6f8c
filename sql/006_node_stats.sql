-- 006: counters each supervisor reports with its heartbeat (stream
-- connections, disconnects, heartbeats sent, slow clients dropped, runs in
-- flight), for operators and the metrics endpoint.
ALTER TABLE nodes ADD COLUMN stats jsonb NOT NULL DEFAULT '{}';
