-- Version 6: config reloads, so that the waterfall over a past window shows
-- them as the running dashboard did (a reload that changed a server is
-- often what happened just before its child restarted).
CREATE TABLE config_reloads (
    id      INTEGER PRIMARY KEY,
    run     INTEGER NOT NULL,       -- runs.id
    at      INTEGER NOT NULL,       -- Unix µs
    changes TEXT    NOT NULL DEFAULT '', -- what the reload changed
    error   TEXT                    -- why the file was not applied; NULL when it was
);

CREATE INDEX config_reloads_at ON config_reloads(at);
