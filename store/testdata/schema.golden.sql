-- user_version 4

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

CREATE TABLE requests (
    id            INTEGER PRIMARY KEY,
    run           INTEGER NOT NULL REFERENCES runs(id),
    pool_id       INTEGER,
    session       TEXT    NOT NULL DEFAULT '',
    server        TEXT    NOT NULL,
    method        TEXT    NOT NULL DEFAULT '',
    name          TEXT    NOT NULL DEFAULT '',
    original_id   TEXT    NOT NULL DEFAULT '',
    received      INTEGER NOT NULL,
    written       INTEGER,                 -- fully written to the child's stdin
    answered      INTEGER,
    status        TEXT    NOT NULL,        -- in-flight, ok, error, timeout, cancelled, failed, orphaned, abandoned
    error_code    INTEGER,
    error         TEXT,
    request_size  INTEGER,
    response_size INTEGER,
    pid           INTEGER                  -- the child that had it
, request_payload TEXT, response_payload TEXT);

CREATE INDEX requests_abandoned ON requests(received) WHERE status = 'abandoned';

CREATE INDEX requests_in_flight ON requests(run) WHERE status = 'in-flight';

CREATE INDEX requests_received ON requests(received);

CREATE UNIQUE INDEX requests_run_pool ON requests(run, pool_id);

CREATE INDEX requests_server ON requests(server, id);

CREATE TABLE runs (
    id      INTEGER PRIMARY KEY,
    started INTEGER NOT NULL,
    ended   INTEGER,                      -- NULL while running, or after a crash
    pid     INTEGER NOT NULL,
    version TEXT    NOT NULL DEFAULT '',
    crashed INTEGER NOT NULL DEFAULT 0    -- 1: found unended by a later run
);

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

