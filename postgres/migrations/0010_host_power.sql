-- Power management: each host's last known power state and the time it spent powered off
-- before changed_at (microseconds). Numbered 0010 to leave 0008-0009 to other branches.
CREATE TABLE host_power (
    host_id    text COLLATE "C" PRIMARY KEY REFERENCES hosts (id) ON DELETE CASCADE,
    state      text NOT NULL,
    changed_at timestamptz NOT NULL,
    off_micros bigint NOT NULL DEFAULT 0
);
