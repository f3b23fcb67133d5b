-- claimed_by is the engine run (instance id) holding an IN_PROGRESS event, so a run renews
-- only its own claims, a run whose claim was taken over does nothing, and a restarted
-- single engine hands back what its dead predecessor held. Claims made before this
-- migration have none and expire as before.
ALTER TABLE events ADD COLUMN claimed_by TEXT;
