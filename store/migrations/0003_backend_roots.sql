-- Version 3: the roots partition a child serves (a shared server runs one
-- child per set of roots its sessions declared), as a JSON array; NULL for
-- the "no roots" partition.

ALTER TABLE backends ADD COLUMN roots TEXT;
