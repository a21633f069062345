-- Version 5: one compact row per request, written once when the request
-- ends (or once it has been in flight for a second: InFlightAfter), and no
-- index on every row instead of four (each cost the writer about a fifth
-- of its time per row, at the row cap twice: insert and delete). A request
-- is found by its row id, the history pages by it, a server's history is
-- read newest first along it (few servers, so a short walk), and a time
-- is found through request_log_time, which holds one row in 64: row ids
-- follow arrival, so the rows received since a time are those after the
-- last sampled row received (a margin) before it. Requests in flight younger than that live
-- in the journal (PATH-inflight), which the next start reads after a crash.
--
-- Values are stored small, as integers where they can be (an integer is
-- bound and kept for less than a text):
--   server, method, name: an id into names while the store's dictionary
--     has room (a client may send any number of different names), else
--     the text; 0 for none.
--   session: the pool's "s<n>" as n, any other id as its text.
--   original_id: a client's id that is a plain JSON integer as the
--     integer, any other (a string, 1.0) as its JSON text.
--   written, answered: microseconds after received.
--   status: a code (0 in-flight, 1 ok, 2 error, 3 timeout, 4 cancelled,
--     5 failed, 6 orphaned, 7 abandoned, 8 unknown).
--
-- The view requests has the columns and values of version 4's table, so
-- that a query written for it reads the same; it adds the stored values
-- the store's own queries filter on (server_ref, method_ref, name_ref,
-- session_ref, status_code).

CREATE TABLE names (
    id   INTEGER PRIMARY KEY,
    text TEXT    NOT NULL UNIQUE
);

-- The row id is the run's and the pool id's: run << 40 | pool_id (the pool
-- numbers requests as they arrive), and run << 40 | 1 << 39 | n for the
-- run's n-th orphaned response (pool id NULL). It orders requests by
-- arrival, run after run, pages the history, and finds a request by its
-- pool id.
CREATE TABLE request_log (
    id               INTEGER PRIMARY KEY,
    run              INTEGER NOT NULL,     -- runs.id (not a foreign key: a check per row)
    session          NOT NULL DEFAULT '',  -- n for "s<n>", or the text
    server           NOT NULL,             -- names.id, or the text
    method           NOT NULL DEFAULT 0,   -- names.id, or the text
    name             NOT NULL DEFAULT 0,   -- names.id, or the text
    original_id      NOT NULL DEFAULT '',  -- an integer, or the JSON text
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

INSERT INTO request_log (id, run, session, server, method, name, original_id, received, written, answered,
        status, error_code, error, request_size, response_size, pid, request_payload, response_payload)
    SELECT CASE WHEN o.pool_id IS NULL THEN (o.run << 40) + (1 << 39) + o.id ELSE (o.run << 40) + o.pool_id END,
        o.run,
        CASE WHEN o.session GLOB 's[1-9]*' AND substr(o.session, 2) NOT GLOB '*[^0-9]*' AND length(o.session) <= 19
            THEN CAST(substr(o.session, 2) AS INTEGER) ELSE o.session END,
        CASE WHEN o.server = '' THEN 0 ELSE coalesce((SELECT id FROM names WHERE text = o.server), o.server) END,
        CASE WHEN o.method = '' THEN 0 ELSE coalesce((SELECT id FROM names WHERE text = o.method), o.method) END,
        CASE WHEN o.name = '' THEN 0 ELSE coalesce((SELECT id FROM names WHERE text = o.name), o.name) END,
        CASE WHEN (o.original_id GLOB '[1-9]*' OR o.original_id GLOB '-[1-9]*' OR o.original_id = '0')
                AND substr(o.original_id, 2) NOT GLOB '*[^0-9]*' AND length(o.original_id) <= 18
            THEN CAST(o.original_id AS INTEGER) ELSE o.original_id END,
        o.received, o.written - o.received, o.answered - o.received,
        CASE o.status WHEN 'in-flight' THEN 0 WHEN 'ok' THEN 1 WHEN 'error' THEN 2 WHEN 'timeout' THEN 3
            WHEN 'cancelled' THEN 4 WHEN 'failed' THEN 5 WHEN 'orphaned' THEN 6 WHEN 'abandoned' THEN 7
            WHEN 'unknown' THEN 8 ELSE o.status END,
        o.error_code, o.error, o.request_size, o.response_size, o.pid, o.request_payload, o.response_payload
    FROM requests o;

DROP TABLE requests;

-- Times, one row in 64 (see the top).
CREATE INDEX request_log_time ON request_log(received) WHERE id % 64 = 0;
-- Small partial indexes: only unanswered rows are in them.
CREATE INDEX request_log_in_flight ON request_log(run) WHERE status = 0;
CREATE INDEX request_log_abandoned ON request_log(received) WHERE status = 7;

CREATE VIEW requests AS
SELECT r.id, r.run, CASE WHEN r.id & 549755813888 = 0 THEN r.id & 549755813887 END AS pool_id,
    CASE WHEN typeof(r.session) = 'integer' THEN 's' || r.session ELSE r.session END AS session,
    CASE WHEN typeof(r.server) = 'integer' THEN coalesce((SELECT text FROM names WHERE id = r.server), '') ELSE r.server END AS server,
    CASE WHEN typeof(r.method) = 'integer' THEN coalesce((SELECT text FROM names WHERE id = r.method), '') ELSE r.method END AS method,
    CASE WHEN typeof(r.name) = 'integer' THEN coalesce((SELECT text FROM names WHERE id = r.name), '') ELSE r.name END AS name,
    CAST(r.original_id AS TEXT) AS original_id, r.received, r.received + r.written AS written,
    r.received + r.answered AS answered,
    CASE r.status WHEN 0 THEN 'in-flight' WHEN 1 THEN 'ok' WHEN 2 THEN 'error' WHEN 3 THEN 'timeout'
        WHEN 4 THEN 'cancelled' WHEN 5 THEN 'failed' WHEN 6 THEN 'orphaned' WHEN 7 THEN 'abandoned'
        WHEN 8 THEN 'unknown' ELSE r.status END AS status,
    r.error_code, r.error, r.request_size, r.response_size, r.pid, r.request_payload, r.response_payload,
    r.server AS server_ref, r.method AS method_ref, r.name AS name_ref, r.session AS session_ref,
    r.status AS status_code
FROM request_log r;
