-- Version 5: one compact row per request, written once when the request
-- ends (or once it has been in flight for a second: InFlightAfter), and
-- three indexes instead of five. Requests in flight younger than that live
-- in the journal (PATH-inflight), which the next start reads after a crash.
--
-- Servers, methods and tool names are stored as ids into names while the
-- store's dictionary has room, else as their text (a client may send any
-- number of different names): an INTEGER value is an id, a TEXT value is
-- the text itself. Times written and answered are microseconds after
-- received. Status is a small code (0 in-flight, 1 ok, 2 error, 3 timeout,
-- 4 cancelled, 5 failed, 6 orphaned, 7 abandoned, 8 unknown).
--
-- The view requests has the columns and values of version 4's table, so
-- that a query written for it reads the same; it adds the stored ids and
-- the status code, which the store's own queries filter on.

CREATE TABLE names (
    id   INTEGER PRIMARY KEY,
    text TEXT    NOT NULL UNIQUE
);

-- The row id is the run's and the pool id's: run << 40 | pool_id (the pool
-- numbers requests as they arrive), and run << 40 | 1 << 39 | n for the
-- run's n-th orphaned response. It orders requests by arrival, run after
-- run, pages the history, and finds a request by its pool id.
CREATE TABLE request_log (
    id               INTEGER PRIMARY KEY,
    run              INTEGER NOT NULL,     -- runs.id (not a foreign key: a check per row)
    pool_id          INTEGER,              -- NULL for an orphaned response
    session          TEXT    NOT NULL DEFAULT '',
    server           NOT NULL,             -- names.id, or the text
    method           NOT NULL DEFAULT '',  -- names.id, or the text
    name             NOT NULL DEFAULT '',  -- names.id, or the text
    original_id      TEXT    NOT NULL DEFAULT '',
    received         INTEGER NOT NULL,     -- Unix µs
    written          INTEGER,              -- µs after received: fully written to the child's stdin
    answered         INTEGER,              -- µs after received
    status           NOT NULL,             -- code, see above
    error_code       INTEGER,
    error            TEXT,
    request_size     INTEGER,
    response_size    INTEGER,
    pid              INTEGER,              -- the child that had it
    request_payload  TEXT,                 -- redacted, bounded prefix
    response_payload TEXT
);

INSERT INTO names (text)
    SELECT v FROM (SELECT server AS v FROM requests UNION SELECT method FROM requests UNION SELECT name FROM requests)
    WHERE v != '' AND length(v) <= 64 LIMIT 4096;

INSERT INTO request_log (id, run, pool_id, session, server, method, name, original_id, received, written, answered,
        status, error_code, error, request_size, response_size, pid, request_payload, response_payload)
    SELECT CASE WHEN o.pool_id IS NULL THEN (o.run << 40) + (1 << 39) + o.id ELSE (o.run << 40) + o.pool_id END,
        o.run, o.pool_id, o.session,
        coalesce((SELECT id FROM names WHERE text = o.server), o.server),
        coalesce((SELECT id FROM names WHERE text = o.method), o.method),
        coalesce((SELECT id FROM names WHERE text = o.name), o.name),
        o.original_id, o.received, o.written - o.received, o.answered - o.received,
        CASE o.status WHEN 'in-flight' THEN 0 WHEN 'ok' THEN 1 WHEN 'error' THEN 2 WHEN 'timeout' THEN 3
            WHEN 'cancelled' THEN 4 WHEN 'failed' THEN 5 WHEN 'orphaned' THEN 6 WHEN 'abandoned' THEN 7
            WHEN 'unknown' THEN 8 ELSE o.status END,
        o.error_code, o.error, o.request_size, o.response_size, o.pid, o.request_payload, o.response_payload
    FROM requests o;

DROP TABLE requests;

-- Since, retention by age, time windows.
CREATE INDEX request_log_received ON request_log(received);
-- The history of one server.
CREATE INDEX request_log_server ON request_log(server, id);
-- Small partial indexes: only unanswered rows are in them.
CREATE INDEX request_log_in_flight ON request_log(run) WHERE status = 0;
CREATE INDEX request_log_abandoned ON request_log(received) WHERE status = 7;

CREATE VIEW requests AS
SELECT r.id, r.run, r.pool_id, r.session,
    CASE WHEN typeof(r.server) = 'integer' THEN (SELECT text FROM names WHERE id = r.server) ELSE r.server END AS server,
    CASE WHEN typeof(r.method) = 'integer' THEN (SELECT text FROM names WHERE id = r.method) ELSE r.method END AS method,
    CASE WHEN typeof(r.name) = 'integer' THEN (SELECT text FROM names WHERE id = r.name) ELSE r.name END AS name,
    r.original_id, r.received, r.received + r.written AS written, r.received + r.answered AS answered,
    CASE r.status WHEN 0 THEN 'in-flight' WHEN 1 THEN 'ok' WHEN 2 THEN 'error' WHEN 3 THEN 'timeout'
        WHEN 4 THEN 'cancelled' WHEN 5 THEN 'failed' WHEN 6 THEN 'orphaned' WHEN 7 THEN 'abandoned'
        WHEN 8 THEN 'unknown' ELSE r.status END AS status,
    r.error_code, r.error, r.request_size, r.response_size, r.pid, r.request_payload, r.response_payload,
    r.server AS server_ref, r.method AS method_ref, r.name AS name_ref, r.status AS status_code
FROM request_log r;
