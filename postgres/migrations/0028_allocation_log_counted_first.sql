-- Two amendments to the allocation log of 0027.
--
-- A statement's changes are counted before they are logged. 0027 moved the transaction's
-- change counter after inserting the statement's entries; a stamp run early (SET
-- CONSTRAINTS … IMMEDIATE fires it at the end of that INSERT, not at commit) then read
-- the counter as it was before the statement, stamped nothing, and left the entries
-- provisional: invisible to every reader. Now the counter moves first, so such a stamp
-- sees the statement's entries (TestAllocationLogStatements); at commit nothing changes.
--
-- The log's primary key on seq goes: nothing looks an entry up by seq (readers order by
-- revision, then seq, and prune by revision), and each entry cost it two index entries,
-- at its insertion and at its stamp.

CREATE OR REPLACE FUNCTION log_allocation_statement() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    n bigint := coalesce(nullif(current_setting('climate.allocation_changes', true), ''), '0')::bigint;
    off bigint := provisional_base();
    k bigint;
    old_ids text[];
    new_ids text[];
BEGIN
    IF TG_OP = 'DELETE' THEN
        SELECT count(*) INTO k FROM old_rows;
    ELSIF TG_OP = 'INSERT' THEN
        SELECT count(*) INTO k FROM new_rows;
    ELSE
        -- An update's rows are paired by id; a pair it really changed is one change.
        SELECT array_agg(o.id), array_agg(nw.id) INTO old_ids, new_ids
        FROM old_rows o FULL JOIN new_rows nw ON o.id = nw.id
        WHERE (o.reservation_id, o.lease_id, o.resource_id, o.start_at, o.end_at, o.slots, o.vcpus, o.memory_mb,
               o.disk_gb, o.preemptible)
            IS DISTINCT FROM (nw.reservation_id, nw.lease_id, nw.resource_id, nw.start_at, nw.end_at, nw.slots,
               nw.vcpus, nw.memory_mb, nw.disk_gb, nw.preemptible);
        k := coalesce(cardinality(old_ids), 0);
    END IF;
    IF k = 0 THEN
        RETURN NULL;
    END IF;
    PERFORM set_config('climate.allocation_changes', (n + k)::text, true);
    IF TG_OP = 'DELETE' THEN
        INSERT INTO allocation_log (revision, removed, allocation_id, reservation_id, lease_id, resource_id, start_at, end_at,
            slots, vcpus, memory_mb, disk_gb, preemptible)
        SELECT -(off + n + row_number() OVER ()), true, id, reservation_id, lease_id, resource_id, start_at, end_at,
            slots, vcpus, memory_mb, disk_gb, preemptible
        FROM old_rows;
    ELSIF TG_OP = 'INSERT' THEN
        INSERT INTO allocation_log (revision, removed, allocation_id, reservation_id, lease_id, resource_id, start_at, end_at,
            slots, vcpus, memory_mb, disk_gb, preemptible)
        SELECT -(off + n + row_number() OVER ()), false, id, reservation_id, lease_id, resource_id, start_at, end_at,
            slots, vcpus, memory_mb, disk_gb, preemptible
        FROM new_rows;
    ELSE
        -- Pair i's removal then its addition, under one number (seq keeps the order).
        INSERT INTO allocation_log (revision, removed, allocation_id, reservation_id, lease_id, resource_id, start_at, end_at,
            slots, vcpus, memory_mb, disk_gb, preemptible)
        SELECT -(off + n + v.i), v.removed, v.id, v.reservation_id, v.lease_id, v.resource_id, v.start_at, v.end_at,
            v.slots, v.vcpus, v.memory_mb, v.disk_gb, v.preemptible
        FROM (SELECT c.i, true AS removed, o.* FROM unnest(old_ids) WITH ORDINALITY c (id, i) JOIN old_rows o USING (id)
              UNION ALL
              SELECT c.i, false, nw.* FROM unnest(new_ids) WITH ORDINALITY c (id, i) JOIN new_rows nw USING (id)) v
        ORDER BY v.i, v.removed DESC;
    END IF;
    RETURN NULL;
END $$;

ALTER TABLE allocation_log DROP CONSTRAINT allocation_log_pkey;
