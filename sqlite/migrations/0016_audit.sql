-- The audit trail (Climate's extension): one row per change, written in the change's own
-- transaction, so a change that rolls back leaves none. Append-only: the store offers no
-- update or delete. id is a never-reused increasing integer (AUTOINCREMENT), the list's
-- order and its keyset position. before_json and after_json are small JSON summaries of
-- the changed fields ('' when none). Times are microseconds since the epoch.
CREATE TABLE audit (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    at               INTEGER NOT NULL,
    actor            TEXT NOT NULL,
    actor_user_id    TEXT NOT NULL DEFAULT '',
    actor_project_id TEXT NOT NULL DEFAULT '',
    request_id       TEXT NOT NULL DEFAULT '',
    action           TEXT NOT NULL,
    target_type      TEXT NOT NULL,
    target_id        TEXT NOT NULL DEFAULT '',
    lease_id         TEXT NOT NULL DEFAULT '',
    host_id          TEXT NOT NULL DEFAULT '',
    project_id       TEXT NOT NULL DEFAULT '',
    reason           TEXT NOT NULL DEFAULT '',
    before_json      TEXT NOT NULL DEFAULT '',
    after_json       TEXT NOT NULL DEFAULT ''
);
CREATE INDEX audit_lease ON audit (lease_id, id) WHERE lease_id <> '';
CREATE INDEX audit_host ON audit (host_id, id) WHERE host_id <> '';
CREATE INDEX audit_project ON audit (project_id, id) WHERE project_id <> '';
CREATE INDEX audit_at ON audit (at);
