-- Each node reports how far its machine's wall clock is from the database's (milliseconds,
-- positive: the machine is behind). Due times and leases follow the database's clock whatever
-- this says; it is there so an operator sees a skewed machine (duetime nodes). Adding a
-- nullable column rewrites nothing: safe under older processes, which leave it NULL.
ALTER TABLE nodes ADD COLUMN clock_offset_ms double precision;
