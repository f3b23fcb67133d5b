-- The audit trail (Climate's extension): one row per change, written in the change's own
-- transaction, so a change that rolls back leaves none. Append-only: the store offers no
-- update or delete. id is taken inside the (serialized) write transaction, so it is commit
-- order; it is the list's order and its keyset position. before_json and after_json are
-- small JSON summaries of the changed fields ('' when none).
CREATE TABLE audit (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at               timestamptz NOT NULL,
    actor            text NOT NULL,
    actor_user_id    text NOT NULL DEFAULT '',
    actor_project_id text NOT NULL DEFAULT '',
    request_id       text NOT NULL DEFAULT '',
    action           text NOT NULL,
    target_type      text NOT NULL,
    target_id        text COLLATE "C" NOT NULL DEFAULT '',
    lease_id         text COLLATE "C" NOT NULL DEFAULT '',
    host_id          text COLLATE "C" NOT NULL DEFAULT '',
    project_id       text COLLATE "C" NOT NULL DEFAULT '',
    reason           text NOT NULL DEFAULT '',
    before_json      text NOT NULL DEFAULT '',
    after_json       text NOT NULL DEFAULT ''
);
CREATE INDEX audit_lease ON audit (lease_id, id) WHERE lease_id <> '';
CREATE INDEX audit_host ON audit (host_id, id) WHERE host_id <> '';
CREATE INDEX audit_project ON audit (project_id, id) WHERE project_id <> '';
CREATE INDEX audit_at ON audit (at);
