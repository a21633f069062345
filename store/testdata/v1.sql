-- A history database at schema version 1, as Switchboard v1 left it after
-- a crash: run 1 ended cleanly, run 2 never ended and has a request in
-- flight, written to child 4242, whose exit was never recorded.
-- Frozen: migrations from version 1 are tested against this file.

PRAGMA user_version = 1;


CREATE TABLE runs (
    id      INTEGER PRIMARY KEY,
    started INTEGER NOT NULL,
    ended   INTEGER,                      -- NULL while running, or after a crash
    pid     INTEGER NOT NULL,
    version TEXT    NOT NULL DEFAULT '',
    crashed INTEGER NOT NULL DEFAULT 0    -- 1: found unended by a later run
);

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
);
CREATE INDEX backends_run_pid ON backends(run, pid);

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
);
CREATE UNIQUE INDEX requests_run_pool ON requests(run, pool_id);
CREATE INDEX requests_received ON requests(received);

INSERT INTO runs (id, started, ended, pid, version, crashed) VALUES
    (1, 1767225600000000, 1767229200000000, 100, 'v0.1.0', 0),
    (2, 1767232800000000, NULL, 200, 'v0.1.0', 0);

INSERT INTO backends (id, run, server, session, pid, process_start, command, started, exited, exit_code, exit_reason) VALUES
    (1, 1, 'memory', '', 4141, 1767225601000000, '["npx","-y","@modelcontextprotocol/server-memory"]', 1767225601000000, 1767229199000000, 0, 'exit status 0'),
    (2, 2, 'memory', '', 4242, 1767232801000000, '["npx","-y","@modelcontextprotocol/server-memory"]', 1767232801000000, NULL, NULL, NULL);

INSERT INTO sessions (run, id, server, client_name, client_version, transport, peer_pid, connected, disconnected, close_reason) VALUES
    (1, 's1', 'memory', 'claude-code', '2.1.0', 'stdio', 5151, 1767225602000000, 1767229100000000, 'client closed'),
    (2, 's1', 'memory', 'cursor', '1.5.0', 'stdio', 5252, 1767232802000000, NULL, NULL);

INSERT INTO requests (id, run, pool_id, session, server, method, name, original_id, received, written, answered, status, error_code, error, request_size, response_size, pid) VALUES
    (1, 1, 1, 's1', 'memory', 'tools/list', '', '1', 1767225603000000, 1767225603000100, 1767225603002000, 'ok', NULL, NULL, 60, 900, 4141),
    (2, 1, 2, 's1', 'memory', 'tools/call', 'read_graph', '2', 1767225604000000, 1767225604000100, 1767225604500000, 'error', -32603, 'graph is empty', 80, 120, 4141),
    (3, 2, 1, 's1', 'memory', 'tools/call', 'create_entities', '"a"', 1767232803000000, 1767232803000200, NULL, 'in-flight', NULL, NULL, 200, NULL, 4242);
