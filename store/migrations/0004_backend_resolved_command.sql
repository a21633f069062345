-- Version 4: what a child was started as when its configured command was
-- resolved (npx -> node), as a JSON array; NULL when it ran the command
-- as configured.

ALTER TABLE backends ADD COLUMN resolved_command TEXT;
