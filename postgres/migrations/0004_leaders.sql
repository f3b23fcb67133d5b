-- One row per maintenance role: held by holder until expires_at (the database's clock, so
-- replicas with skewed clocks agree on who leads).
CREATE TABLE leaders (
    name       text PRIMARY KEY,
    holder     text NOT NULL,
    expires_at timestamptz NOT NULL
);
