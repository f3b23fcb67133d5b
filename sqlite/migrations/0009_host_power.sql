-- Power management: each host's last known power state and the time it spent powered off
-- before changed_at (microseconds). Numbered 0009 to leave 0007-0008 to other branches.
CREATE TABLE host_power (
    host_id    TEXT PRIMARY KEY REFERENCES hosts (id) ON DELETE CASCADE,
    state      TEXT NOT NULL,
    changed_at INTEGER NOT NULL,
    off_micros INTEGER NOT NULL DEFAULT 0
);
