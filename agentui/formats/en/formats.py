"""English date formats: the admin writes dates as the pages do before format.js rewrites
them (`2026-12-03 11:47`, 24-hour, in TIME_ZONE), not Django's `Dec. 3, 2026, 11:47 a.m.`."""

DATE_FORMAT = "Y-m-d"
TIME_FORMAT = "H:i"
DATETIME_FORMAT = "Y-m-d H:i"
SHORT_DATE_FORMAT = "Y-m-d"
SHORT_DATETIME_FORMAT = "Y-m-d H:i"
