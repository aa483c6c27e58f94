-- The lease-owner index cost more than it saved: every claim and finish rewrote it, and finish
-- plans started from it, walking the node's dead entries too. The running set is small, so
-- lease extension and expiry reach it through timers_leased, and finish through the primary key.
DROP INDEX IF EXISTS timers_owner;
