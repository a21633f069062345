-- user_version 8

CREATE TABLE backends (
    id            INTEGER PRIMARY KEY,
    run           INTEGER NOT NULL REFERENCES runs(id),
    server        TEXT    NOT NULL,
    session       TEXT    NOT NULL DEFAULT '', -- owning session (share: session)
    pid           INTEGER NOT NULL,
    process_start INTEGER,                     -- the process's start time
    command       TEXT    NOT NULL DEFAULT '[]', -- JSON array, secrets redacted
    started       INTEGER NOT NULL,
    exited        INTEGER,
    exit_code     INTEGER,
    exit_reason   TEXT
, roots TEXT, resolved_command TEXT);

CREATE INDEX backends_run_pid ON backends(run, pid);

CREATE TABLE config_reloads (
    id      INTEGER PRIMARY KEY,
    run     INTEGER NOT NULL,       -- runs.id
    at      INTEGER NOT NULL,       -- Unix µs
    changes TEXT    NOT NULL DEFAULT '', -- what the reload changed
    error   TEXT                    -- why the file was not applied; NULL when it was
);

CREATE INDEX config_reloads_at ON config_reloads(at);

CREATE TABLE names (
    id   INTEGER PRIMARY KEY,
    text TEXT    NOT NULL UNIQUE
);

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

CREATE INDEX request_log_abandoned ON request_log(received) WHERE status = 7;

CREATE INDEX request_log_in_flight ON request_log(run) WHERE status = 0;

CREATE INDEX request_log_orphaned ON request_log(received) WHERE status = 6;

CREATE INDEX request_log_time ON request_log(received) WHERE id % 64 = 0;

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

CREATE TABLE runs (
    id      INTEGER PRIMARY KEY,
    started INTEGER NOT NULL,
    ended   INTEGER,                      -- NULL while running, or after a crash
    pid     INTEGER NOT NULL,
    version TEXT    NOT NULL DEFAULT '',
    crashed INTEGER NOT NULL DEFAULT 0    -- 1: found unended by a later run
, alive INTEGER);

CREATE TABLE sessions (
    run            INTEGER NOT NULL REFERENCES runs(id),
    id             TEXT    NOT NULL,
    server         TEXT    NOT NULL,
    client_name    TEXT    NOT NULL DEFAULT '',
    client_version TEXT    NOT NULL DEFAULT '',
    transport      TEXT    NOT NULL DEFAULT '',
    peer_pid       INTEGER,
    connected      INTEGER NOT NULL,
    disconnected   INTEGER,
    close_reason   TEXT,
    PRIMARY KEY (run, id)
) WITHOUT ROWID;

