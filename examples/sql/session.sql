-- A psql session with duetime's SQL functions (psql -v ON_ERROR_STOP=1 -f session.sql), the
-- search_path set to duetime's schema.
BEGIN;
SELECT timer_key, action FROM schedule('shop', 'invoice.due', '{"invoice": 7}',
    at => '2030-01-31T09:00:00Z', key => 'invoice-7');
SELECT timer_key, action FROM schedule('shop', 'invoice.due', '{"invoice": 7}',
    at => '2030-01-31T09:00:00Z', key => 'invoice-7');
SELECT timer_key, action FROM schedule('shop', 'standup.reminder',
    local => '2030-03-31 09:30', timezone => 'Europe/Berlin', key => 'standup');
SELECT count(*) AS stored FROM schedule_many('shop',
    '[{"type": "digest", "delay": 3600, "key": "d1"}, {"type": "digest", "delay": "PT2H", "key": "d2"}]');
SELECT status FROM cancel('shop', 'd2');
-- A schedule: created, then the same definition kept; its first occurrence is planned by a
-- worker after the commit (status pending until then).
SELECT action, status FROM add_schedule('shop', 'weekly-digest', 'digest.send',
    '{"list": "all"}', cron => '0 9 * * MON', timezone => 'Europe/Paris');
SELECT action, status FROM add_schedule('shop', 'weekly-digest', 'digest.send',
    '{"list": "all"}', cron => '0 9 * * MON', timezone => 'Europe/Paris');
COMMIT;
