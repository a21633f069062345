-- A history database at schema version 4, as the Switchboard before the
-- compact request log left it after a crash: run 1 ended cleanly (an
-- orphaned response, a captured payload, a request whose end was lost at
-- a clean stop), run 2 crashed and its request was abandoned by run 3,
-- which crashed too with a request in flight, written to child 4343 (its
-- roots and resolved command recorded), whose exit was never recorded.
-- One tool name is longer than the names dictionary keeps.
-- Frozen: migrations from version 4 are tested against this file.

PRAGMA user_version = 4;

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

INSERT INTO runs (id, started, ended, pid, version, crashed) VALUES
    (1, 1767225600000000, 1767229200000000, 100, 'v0.1.0', 0),
    (2, 1767232800000000, NULL, 200, 'v0.1.0', 1),
    (3, 1767240000000000, NULL, 300, 'v0.1.0', 0);

INSERT INTO backends (id, run, server, session, pid, process_start, command, started, exited, exit_code, exit_reason, roots, resolved_command) VALUES
    (1, 1, 'memory', '', 4141, 1767225601000000, '["npx","-y","@modelcontextprotocol/server-memory"]', 1767225601000000, 1767229199000000, 0, 'exit status 0', NULL, NULL),
    (2, 3, 'fs', '', 4343, 1767240001000000, '["npx","-y","@modelcontextprotocol/server-filesystem"]', 1767240001000000, NULL, NULL, NULL, '["file:///work/a"]', '["/usr/bin/node","/cache/fs/dist/index.js"]');

INSERT INTO sessions (run, id, server, client_name, client_version, transport, peer_pid, connected, disconnected, close_reason) VALUES
    (1, 's1', 'memory', 'claude-code', '2.1.0', 'stdio', 5151, 1767225602000000, 1767229100000000, 'client closed'),
    (3, 's1', 'fs', 'cursor', '1.5.0', 'stdio', 5353, 1767240002000000, NULL, NULL);

INSERT INTO requests (id, run, pool_id, session, server, method, name, original_id, received, written, answered, status, error_code, error, request_size, response_size, pid, request_payload, response_payload) VALUES
    (1, 1, 1, 's1', 'memory', 'tools/list', '', '1', 1767225603000000, 1767225603000100, 1767225603002000, 'ok', NULL, NULL, 60, 900, 4141, NULL, NULL),
    (2, 1, 2, 's1', 'memory', 'tools/call', 'read_graph', '2', 1767225604000000, 1767225604000100, 1767225604500000, 'error', -32603, 'graph is empty', 80, 120, 4141,
        '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"read_graph"}}', '{"jsonrpc":"2.0","id":2,"error":{"code":-32603,"message":"graph is empty"}}'),
    (3, 1, NULL, '', 'memory', '', '', '77', 1767225605000000, NULL, 1767225605000000, 'orphaned', NULL, 'a response to an id nobody waits for', NULL, NULL, 4141, NULL, NULL),
    (4, 1, 3, 's1', 'memory', 'tools/call', 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx', '3', 1767225606000000, NULL, NULL, 'unknown', NULL, 'the end of this request was not recorded', 90, NULL, NULL, NULL, NULL),
    (5, 2, 1, 's1', 'memory', 'tools/call', 'create_entities', '"a"', 1767232803000000, 1767232803000200, NULL, 'abandoned', NULL, 'Switchboard stopped (run 2 crashed or was killed) before this request was answered', 200, NULL, 4242, NULL, NULL),
    (6, 3, 1, 's1', 'fs', 'tools/call', 'read_text_file', '"b"', 1767240003000000, 1767240003000300, NULL, 'in-flight', NULL, NULL, 150, NULL, 4343, NULL, NULL);
