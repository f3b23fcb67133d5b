-- The replicas serving this installation: each renews its row now and then
-- (Store.ShareWriters), and they divide the writers between them, since every commit that
-- changed allocations takes the installation's commit stamp in turn (postgres/doc.go).
CREATE TABLE replicas (
    instance text PRIMARY KEY,
    seen_at  timestamptz NOT NULL
);
