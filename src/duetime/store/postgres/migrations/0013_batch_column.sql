-- Scheduling sends a column that is the same for every timer of a batch (the namespace, the
-- type, the options) as one value, and a column that is NULL for all of them as none, instead
-- of one value a timer: encoding ten such arrays element by element was half of what encoding a
-- batch cost the client. batch_column gives such a column back its full length; unnest pads an
-- empty one with NULLs by itself. Called once a statement, not once a row.
CREATE FUNCTION batch_column(given anyarray, rows integer) RETURNS anyarray
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE WHEN cardinality(given) = 1 AND rows > 1
        THEN array_fill(given[1], ARRAY[rows]) ELSE given END
$$;

COMMENT ON FUNCTION batch_column(anyarray, integer) IS
    'a scheduling batch''s column sent as one value, repeated for its rows';
