-- schedule_many's common batch (migration 0029) is taken only with a valid on_conflict: a batch
-- with another one goes element by element, whose first element refuses it naming the field,
-- as schedule() does (the set path read on_conflict only to tell keep and error apart, so a
-- batch without keys took any value).
CREATE OR REPLACE FUNCTION sql_simple_batch(timers jsonb, on_conflict text, most integer) RETURNS boolean
LANGUAGE sql IMMUTABLE
AS $$
    -- The patterns are matched once a distinct value (a batch's types and instants repeat),
    -- and a payload's text only where it is long enough to break a limit: matching every
    -- element was most of what checking a batch cost.
    WITH items AS MATERIALIZED (
        SELECT item, CASE WHEN item ? 'payload' THEN (item -> 'payload')::text END AS payload
        FROM jsonb_array_elements(timers) AS e (item)
    )
    SELECT coalesce((
        SELECT bool_and(
            jsonb_typeof(item) = 'object'
            AND item - ARRAY['type', 'payload', 'at', 'delay', 'key', 'subject', 'max_attempts',
                'priority'] = '{}'::jsonb
            AND jsonb_typeof(item -> 'type') = 'string'
            AND ((jsonb_typeof(item -> 'at') = 'string' AND NOT item ? 'delay')
                 OR (jsonb_typeof(item -> 'delay') = 'number' AND NOT item ? 'at'
                     AND (item -> 'delay')::numeric BETWEEN 0 AND 999999999))
            AND (payload IS NULL OR (octet_length(payload) <= most
                 AND (octet_length(payload) < 130
                      OR length(payload) - length(translate(payload, '[{', '')) <= 64)
                 AND (octet_length(payload) < 255 OR payload !~ '[0-9]{255}')))
            AND (NOT item ? 'key' OR (jsonb_typeof(item -> 'key') = 'string'
                 AND char_length(item ->> 'key') <= 255 AND (item ->> 'key') !~ '^\s*$'
                 AND (item ->> 'key') !~ '[\x01-\x1f\x7f-\x9f\u2028\u2029]'))
            AND (NOT item ? 'subject' OR (jsonb_typeof(item -> 'subject') = 'string'
                 AND char_length(item ->> 'subject') <= 255 AND (item ->> 'subject') !~ '^\s*$'
                 AND (item ->> 'subject') !~ '[\x01-\x1f\x7f-\x9f\u2028\u2029]'))
            AND (NOT item ? 'max_attempts' OR (jsonb_typeof(item -> 'max_attempts') = 'number'
                 AND (item -> 'max_attempts')::numeric BETWEEN 1 AND 1000
                 AND scale((item -> 'max_attempts')::numeric) = 0))
            AND (NOT item ? 'priority' OR (jsonb_typeof(item -> 'priority') = 'number'
                 AND (item -> 'priority')::numeric BETWEEN 0 AND 9
                 AND scale((item -> 'priority')::numeric) = 0))
        ) AND count(item -> 'key') = count(DISTINCT item ->> 'key')
          AND (on_conflict IN ('keep', 'error')
               OR (on_conflict = 'update' AND count(item -> 'key') = 0))
        FROM items
    ) AND (
        SELECT bool_and(char_length(type) <= 200 AND type ~ '^[A-Za-z0-9_][A-Za-z0-9_.:/-]*$')
        FROM (SELECT DISTINCT item ->> 'type' AS type FROM items) AS types
    ) AND (
        SELECT coalesce(bool_and(at ~ ('^(197[1-9]|19[89][0-9]|[2-7][0-9]{3})-(0[1-9]|1[0-2])-'
            '(0[1-9]|1[0-9]|2[0-8])[T ]([01][0-9]|2[0-3]):[0-5][0-9]'
            '(:[0-5][0-9](\.[0-9]{1,6})?)?(Z|[+-](0[0-9]|1[0-4]):?[0-5][0-9])$')), true)
        FROM (SELECT DISTINCT item ->> 'at' AS at FROM items WHERE item ? 'at') AS ats
    ), false)
$$;
