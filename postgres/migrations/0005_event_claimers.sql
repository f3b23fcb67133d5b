-- claimed_by is the engine run (instance id) holding an IN_PROGRESS event, so a replica
-- renews only its own claims (its heartbeat) and a replica whose claim was taken over does
-- nothing. Claims made before this migration have none and expire as before.
ALTER TABLE events ADD COLUMN claimed_by text;
