-- A destination's rate (duetime.model.limits): a flow_limits row keyed '@<destination>' whose
-- destination column names the destination whose delivery rows it governs (NULL: a rule on the
-- event types its pattern matches).
ALTER TABLE flow_limits ADD COLUMN destination text;
