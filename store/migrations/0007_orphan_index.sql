-- Version 7: orphaned responses (a child's late answer to a request that
-- ended: cancelled, timed out) by time. An orphan's row id is above every
-- request id of its run (version 5), so the ids do not place it among the
-- requests received around it: the history lists requests along the row
-- ids and orphans along this index, merged by time received, and pruning
-- finds old orphans here. Small: only orphans are in it, and no other row
-- costs the writer anything for it.
CREATE INDEX request_log_orphaned ON request_log(received) WHERE status = 6;
