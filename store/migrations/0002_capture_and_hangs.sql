-- Version 2: opt-in payload capture, and indexes for the hang view and the
-- UI's per-server history.

ALTER TABLE requests ADD COLUMN request_payload TEXT;  -- redacted, bounded prefix
ALTER TABLE requests ADD COLUMN response_payload TEXT; -- redacted, bounded prefix

-- Small partial indexes: only unanswered rows are in them.
CREATE INDEX requests_in_flight ON requests(run) WHERE status = 'in-flight';
CREATE INDEX requests_abandoned ON requests(received) WHERE status = 'abandoned';

CREATE INDEX requests_server ON requests(server, id);
