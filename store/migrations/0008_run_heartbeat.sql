-- Version 8: a run's heartbeat. While requests are in flight, the writer
-- records every Options.HeartbeatInterval that its run is alive (Unix µs).
-- A run that crashed ended after it, and after its last recorded event:
-- the later of the two is where its abandoned requests stopped waiting.
-- Without it, a call that was the run's last event aged no time at all.

ALTER TABLE runs ADD COLUMN alive INTEGER;
