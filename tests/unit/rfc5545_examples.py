"""Every example of RFC 5545 section 3.8.5.3, written out as the RFC lists its occurrences.

Each example: a title, DTSTART (local, TZID=America/New_York), one RRULE, EXDATEs, and the
occurrences as the RFC prints them: groups of (year, EDT|EST, time, "Sep 2-11; Oct 1,3") so the
data can be read against the RFC line by line. For the rules that go on "forever" the RFC
lists a prefix, and so does this file; ``count`` is how many a test asks for.

One printed result is wrong in the RFC itself and is corrected here, with the reason:
"Every 3 hours from 9:00 AM to 5:00 PM on a specific day" says UNTIL=19970902T170000Z, which is
13:00 EDT, yet lists 15:00 EDT (19:00Z, after UNTIL). Read as the RFC's own rule says (UNTIL
compared in UTC when DTSTART has a zone), the occurrences are 09:00 and 12:00.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta

MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
OFFSETS = {"EDT": timedelta(hours=-4), "EST": timedelta(hours=-5)}

Group = tuple[int, str, str, str]


@dataclass(frozen=True)
class Example:
    title: str
    dtstart: str
    rrule: str
    groups: tuple[Group, ...]
    exdates: tuple[str, ...] = ()
    forever: bool = False

    def expected(self) -> list[tuple[datetime, datetime]]:
        """(local wall time, UTC instant as naive) of each listed occurrence, in order."""
        found = []
        for year, abbr, clock, days in self.groups:
            hour, minute = (int(x) for x in clock.split(":"))
            for month, day in _days(days):
                local = datetime(year, month, day, hour, minute)
                found.append((local, local - OFFSETS[abbr]))
        return found


def _days(text: str) -> list[tuple[int, int]]:
    out = []
    for chunk in text.split(";"):
        chunk = chunk.strip()
        match = re.fullmatch(r"([A-Z][a-z]{2}) (.+)", chunk)
        assert match, chunk
        month = MONTHS.index(match.group(1)) + 1
        for item in match.group(2).split(","):
            if "-" in item:
                first, last = (int(x) for x in item.split("-"))
                out.extend((month, d) for d in range(first, last + 1))
            else:
                out.append((month, int(item)))
    return out


def _times(year: int, abbr: str, month: str, day: int, clocks: list[str]) -> tuple[Group, ...]:
    return tuple((year, abbr, clock, f"{month} {day}") for clock in clocks)


_NINE = "9:00"
_EVERY_20_MIN = [f"{h}:{m:02d}" for h in range(9, 17) for m in (0, 20, 40)]

EXAMPLES: tuple[Example, ...] = (
    Example(
        "Daily for 10 occurrences",
        "1997-09-02T09:00",
        "FREQ=DAILY;COUNT=10",
        ((1997, "EDT", _NINE, "Sep 2-11"),),
    ),
    Example(
        "Daily until December 24, 1997",
        "1997-09-02T09:00",
        "FREQ=DAILY;UNTIL=19971224T000000Z",
        (
            (1997, "EDT", _NINE, "Sep 2-30; Oct 1-25"),
            (1997, "EST", _NINE, "Oct 26-31; Nov 1-30; Dec 1-23"),
        ),
    ),
    Example(
        "Every other day - forever",
        "1997-09-02T09:00",
        "FREQ=DAILY;INTERVAL=2",
        (
            (1997, "EDT", _NINE, "Sep 2,4,6,8,10,12,14,16,18,20,22,24,26,28,30"),
            (1997, "EDT", _NINE, "Oct 2,4,6,8,10,12,14,16,18,20,22,24"),
            (1997, "EST", _NINE, "Oct 26,28,30; Nov 1,3,5,7,9,11,13,15,17,19,21,23,25,27,29"),
            (1997, "EST", _NINE, "Dec 1,3,5,7,9,11,13,15,17,19,21,23,25,27,29,31"),
        ),
        forever=True,
    ),
    Example(
        "Every 10 days, 5 occurrences",
        "1997-09-02T09:00",
        "FREQ=DAILY;INTERVAL=10;COUNT=5",
        ((1997, "EDT", _NINE, "Sep 2,12,22; Oct 2,12"),),
    ),
    Example(
        "Every day in January, for 3 years (yearly form)",
        "1998-01-01T09:00",
        "FREQ=YEARLY;UNTIL=20000131T140000Z;BYMONTH=1;BYDAY=SU,MO,TU,WE,TH,FR,SA",
        (
            (1998, "EST", _NINE, "Jan 1-31"),
            (1999, "EST", _NINE, "Jan 1-31"),
            (2000, "EST", _NINE, "Jan 1-31"),
        ),
    ),
    Example(
        "Every day in January, for 3 years (daily form)",
        "1998-01-01T09:00",
        "FREQ=DAILY;UNTIL=20000131T140000Z;BYMONTH=1",
        (
            (1998, "EST", _NINE, "Jan 1-31"),
            (1999, "EST", _NINE, "Jan 1-31"),
            (2000, "EST", _NINE, "Jan 1-31"),
        ),
    ),
    Example(
        "Weekly for 10 occurrences",
        "1997-09-02T09:00",
        "FREQ=WEEKLY;COUNT=10",
        (
            (1997, "EDT", _NINE, "Sep 2,9,16,23,30; Oct 7,14,21"),
            (1997, "EST", _NINE, "Oct 28; Nov 4"),
        ),
    ),
    Example(
        "Weekly until December 24, 1997",
        "1997-09-02T09:00",
        "FREQ=WEEKLY;UNTIL=19971224T000000Z",
        (
            (1997, "EDT", _NINE, "Sep 2,9,16,23,30; Oct 7,14,21"),
            (1997, "EST", _NINE, "Oct 28; Nov 4,11,18,25; Dec 2,9,16,23"),
        ),
    ),
    Example(
        "Every other week - forever",
        "1997-09-02T09:00",
        "FREQ=WEEKLY;INTERVAL=2;WKST=SU",
        (
            (1997, "EDT", _NINE, "Sep 2,16,30; Oct 14"),
            (1997, "EST", _NINE, "Oct 28; Nov 11,25; Dec 9,23"),
            (1998, "EST", _NINE, "Jan 6,20; Feb 3,17"),
        ),
        forever=True,
    ),
    Example(
        "Weekly on Tuesday and Thursday for five weeks (UNTIL form)",
        "1997-09-02T09:00",
        "FREQ=WEEKLY;UNTIL=19971007T000000Z;WKST=SU;BYDAY=TU,TH",
        ((1997, "EDT", _NINE, "Sep 2,4,9,11,16,18,23,25,30; Oct 2"),),
    ),
    Example(
        "Weekly on Tuesday and Thursday for five weeks (COUNT form)",
        "1997-09-02T09:00",
        "FREQ=WEEKLY;COUNT=10;WKST=SU;BYDAY=TU,TH",
        ((1997, "EDT", _NINE, "Sep 2,4,9,11,16,18,23,25,30; Oct 2"),),
    ),
    Example(
        "Every other week on Monday, Wednesday, and Friday until December 24, 1997",
        "1997-09-01T09:00",
        "FREQ=WEEKLY;INTERVAL=2;UNTIL=19971224T000000Z;WKST=SU;BYDAY=MO,WE,FR",
        (
            (1997, "EDT", _NINE, "Sep 1,3,5,15,17,19,29; Oct 1,3,13,15,17"),
            (1997, "EST", _NINE, "Oct 27,29,31; Nov 10,12,14,24,26,28; Dec 8,10,12,22"),
        ),
    ),
    Example(
        "Every other week on Tuesday and Thursday, for 8 occurrences",
        "1997-09-02T09:00",
        "FREQ=WEEKLY;INTERVAL=2;COUNT=8;WKST=SU;BYDAY=TU,TH",
        ((1997, "EDT", _NINE, "Sep 2,4,16,18,30; Oct 2,14,16"),),
    ),
    Example(
        "Monthly on the first Friday for 10 occurrences",
        "1997-09-05T09:00",
        "FREQ=MONTHLY;COUNT=10;BYDAY=1FR",
        (
            (1997, "EDT", _NINE, "Sep 5; Oct 3"),
            (1997, "EST", _NINE, "Nov 7; Dec 5"),
            (1998, "EST", _NINE, "Jan 2; Feb 6; Mar 6; Apr 3"),
            (1998, "EDT", _NINE, "May 1; Jun 5"),
        ),
    ),
    Example(
        "Monthly on the first Friday until December 24, 1997",
        "1997-09-05T09:00",
        "FREQ=MONTHLY;UNTIL=19971224T000000Z;BYDAY=1FR",
        (
            (1997, "EDT", _NINE, "Sep 5; Oct 3"),
            (1997, "EST", _NINE, "Nov 7; Dec 5"),
        ),
    ),
    Example(
        "Every other month on the first and last Sunday of the month for 10 occurrences",
        "1997-09-07T09:00",
        "FREQ=MONTHLY;INTERVAL=2;COUNT=10;BYDAY=1SU,-1SU",
        (
            (1997, "EDT", _NINE, "Sep 7,28"),
            (1997, "EST", _NINE, "Nov 2,30"),
            (1998, "EST", _NINE, "Jan 4,25; Mar 1,29"),
            (1998, "EDT", _NINE, "May 3,31"),
        ),
    ),
    Example(
        "Monthly on the second-to-last Monday of the month for 6 months",
        "1997-09-22T09:00",
        "FREQ=MONTHLY;COUNT=6;BYDAY=-2MO",
        (
            (1997, "EDT", _NINE, "Sep 22; Oct 20"),
            (1997, "EST", _NINE, "Nov 17; Dec 22"),
            (1998, "EST", _NINE, "Jan 19; Feb 16"),
        ),
    ),
    Example(
        "Monthly on the third-to-the-last day of the month, forever",
        "1997-09-28T09:00",
        "FREQ=MONTHLY;BYMONTHDAY=-3",
        (
            (1997, "EDT", _NINE, "Sep 28"),
            (1997, "EST", _NINE, "Oct 29; Nov 28; Dec 29"),
            (1998, "EST", _NINE, "Jan 29; Feb 26"),
        ),
        forever=True,
    ),
    Example(
        "Monthly on the 2nd and 15th of the month for 10 occurrences",
        "1997-09-02T09:00",
        "FREQ=MONTHLY;COUNT=10;BYMONTHDAY=2,15",
        (
            (1997, "EDT", _NINE, "Sep 2,15; Oct 2,15"),
            (1997, "EST", _NINE, "Nov 2,15; Dec 2,15"),
            (1998, "EST", _NINE, "Jan 2,15"),
        ),
    ),
    Example(
        "Monthly on the first and last day of the month for 10 occurrences",
        "1997-09-30T09:00",
        "FREQ=MONTHLY;COUNT=10;BYMONTHDAY=1,-1",
        (
            (1997, "EDT", _NINE, "Sep 30; Oct 1"),
            (1997, "EST", _NINE, "Oct 31; Nov 1,30; Dec 1,31"),
            (1998, "EST", _NINE, "Jan 1,31; Feb 1"),
        ),
    ),
    Example(
        "Every 18 months on the 10th thru 15th of the month for 10 occurrences",
        "1997-09-10T09:00",
        "FREQ=MONTHLY;INTERVAL=18;COUNT=10;BYMONTHDAY=10,11,12,13,14,15",
        (
            (1997, "EDT", _NINE, "Sep 10-15"),
            (1999, "EST", _NINE, "Mar 10-13"),
        ),
    ),
    Example(
        "Every Tuesday, every other month",
        "1997-09-02T09:00",
        "FREQ=MONTHLY;INTERVAL=2;BYDAY=TU",
        (
            (1997, "EDT", _NINE, "Sep 2,9,16,23,30"),
            (1997, "EST", _NINE, "Nov 4,11,18,25"),
            (1998, "EST", _NINE, "Jan 6,13,20,27; Mar 3,10,17,24,31"),
        ),
        forever=True,
    ),
    Example(
        "Yearly in June and July for 10 occurrences",
        "1997-06-10T09:00",
        "FREQ=YEARLY;COUNT=10;BYMONTH=6,7",
        tuple((year, "EDT", _NINE, "Jun 10; Jul 10") for year in range(1997, 2002)),
    ),
    Example(
        "Every other year on January, February, and March for 10 occurrences",
        "1997-03-10T09:00",
        "FREQ=YEARLY;INTERVAL=2;COUNT=10;BYMONTH=1,2,3",
        (
            (1997, "EST", _NINE, "Mar 10"),
            (1999, "EST", _NINE, "Jan 10; Feb 10; Mar 10"),
            (2001, "EST", _NINE, "Jan 10; Feb 10; Mar 10"),
            (2003, "EST", _NINE, "Jan 10; Feb 10; Mar 10"),
        ),
    ),
    Example(
        "Every third year on the 1st, 100th, and 200th day for 10 occurrences",
        "1997-01-01T09:00",
        "FREQ=YEARLY;INTERVAL=3;COUNT=10;BYYEARDAY=1,100,200",
        (
            (1997, "EST", _NINE, "Jan 1"),
            (1997, "EDT", _NINE, "Apr 10; Jul 19"),
            (2000, "EST", _NINE, "Jan 1"),
            (2000, "EDT", _NINE, "Apr 9; Jul 18"),
            (2003, "EST", _NINE, "Jan 1"),
            (2003, "EDT", _NINE, "Apr 10; Jul 19"),
            (2006, "EST", _NINE, "Jan 1"),
        ),
    ),
    Example(
        "Every 20th Monday of the year, forever",
        "1997-05-19T09:00",
        "FREQ=YEARLY;BYDAY=20MO",
        (
            (1997, "EDT", _NINE, "May 19"),
            (1998, "EDT", _NINE, "May 18"),
            (1999, "EDT", _NINE, "May 17"),
        ),
        forever=True,
    ),
    Example(
        "Monday of week number 20 (where the default start of the week is Monday), forever",
        "1997-05-12T09:00",
        "FREQ=YEARLY;BYWEEKNO=20;BYDAY=MO",
        (
            (1997, "EDT", _NINE, "May 12"),
            (1998, "EDT", _NINE, "May 11"),
            (1999, "EDT", _NINE, "May 17"),
        ),
        forever=True,
    ),
    Example(
        "Every Thursday in March, forever",
        "1997-03-13T09:00",
        "FREQ=YEARLY;BYMONTH=3;BYDAY=TH",
        (
            (1997, "EST", _NINE, "Mar 13,20,27"),
            (1998, "EST", _NINE, "Mar 5,12,19,26"),
            (1999, "EST", _NINE, "Mar 4,11,18,25"),
        ),
        forever=True,
    ),
    Example(
        "Every Thursday, but only during June, July, and August, forever",
        "1997-06-05T09:00",
        "FREQ=YEARLY;BYDAY=TH;BYMONTH=6,7,8",
        (
            (1997, "EDT", _NINE, "Jun 5,12,19,26; Jul 3,10,17,24,31; Aug 7,14,21,28"),
            (1998, "EDT", _NINE, "Jun 4,11,18,25; Jul 2,9,16,23,30; Aug 6,13,20,27"),
            (1999, "EDT", _NINE, "Jun 3,10,17,24; Jul 1,8,15,22,29; Aug 5,12,19,26"),
        ),
        forever=True,
    ),
    Example(
        "Every Friday the 13th, forever",
        "1997-09-02T09:00",
        "FREQ=MONTHLY;BYDAY=FR;BYMONTHDAY=13",
        (
            (1998, "EST", _NINE, "Feb 13; Mar 13; Nov 13"),
            (1999, "EDT", _NINE, "Aug 13"),
            (2000, "EDT", _NINE, "Oct 13"),
        ),
        exdates=("1997-09-02T09:00",),
        forever=True,
    ),
    Example(
        "The first Saturday that follows the first Sunday of the month, forever",
        "1997-09-13T09:00",
        "FREQ=MONTHLY;BYDAY=SA;BYMONTHDAY=7,8,9,10,11,12,13",
        (
            (1997, "EDT", _NINE, "Sep 13; Oct 11"),
            (1997, "EST", _NINE, "Nov 8; Dec 13"),
            (1998, "EST", _NINE, "Jan 10; Feb 7; Mar 7"),
            (1998, "EDT", _NINE, "Apr 11; May 9; Jun 13"),
        ),
        forever=True,
    ),
    Example(
        "Every 4 years, the first Tuesday after a Monday in November, forever",
        "1996-11-05T09:00",
        "FREQ=YEARLY;INTERVAL=4;BYMONTH=11;BYDAY=TU;BYMONTHDAY=2,3,4,5,6,7,8",
        (
            (1996, "EST", _NINE, "Nov 5"),
            (2000, "EST", _NINE, "Nov 7"),
            (2004, "EST", _NINE, "Nov 2"),
        ),
        forever=True,
    ),
    Example(
        "The third instance of one of Tuesday, Wednesday, or Thursday, for the next 3 months",
        "1997-09-04T09:00",
        "FREQ=MONTHLY;COUNT=3;BYDAY=TU,WE,TH;BYSETPOS=3",
        (
            (1997, "EDT", _NINE, "Sep 4; Oct 7"),
            (1997, "EST", _NINE, "Nov 6"),
        ),
    ),
    Example(
        "The second-to-last weekday of the month",
        "1997-09-29T09:00",
        "FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-2",
        (
            (1997, "EDT", _NINE, "Sep 29"),
            (1997, "EST", _NINE, "Oct 30; Nov 27; Dec 30"),
            (1998, "EST", _NINE, "Jan 29; Feb 26; Mar 30"),
        ),
        forever=True,
    ),
    Example(
        "Every 3 hours from 9:00 AM to 5:00 PM on a specific day (corrected: see module)",
        "1997-09-02T09:00",
        "FREQ=HOURLY;INTERVAL=3;UNTIL=19970902T170000Z",
        _times(1997, "EDT", "Sep", 2, ["9:00", "12:00"]),
    ),
    Example(
        "Every 15 minutes for 6 occurrences",
        "1997-09-02T09:00",
        "FREQ=MINUTELY;INTERVAL=15;COUNT=6",
        _times(1997, "EDT", "Sep", 2, ["9:00", "9:15", "9:30", "9:45", "10:00", "10:15"]),
    ),
    Example(
        "Every hour and a half for 4 occurrences",
        "1997-09-02T09:00",
        "FREQ=MINUTELY;INTERVAL=90;COUNT=4",
        _times(1997, "EDT", "Sep", 2, ["9:00", "10:30", "12:00", "13:30"]),
    ),
    Example(
        "Every 20 minutes from 9:00 AM to 4:40 PM every day (daily form)",
        "1997-09-02T09:00",
        "FREQ=DAILY;BYHOUR=9,10,11,12,13,14,15,16;BYMINUTE=0,20,40",
        _times(1997, "EDT", "Sep", 2, _EVERY_20_MIN) + _times(1997, "EDT", "Sep", 3, _EVERY_20_MIN),
        forever=True,
    ),
    Example(
        "Every 20 minutes from 9:00 AM to 4:40 PM every day (minutely form)",
        "1997-09-02T09:00",
        "FREQ=MINUTELY;INTERVAL=20;BYHOUR=9,10,11,12,13,14,15,16",
        _times(1997, "EDT", "Sep", 2, _EVERY_20_MIN) + _times(1997, "EDT", "Sep", 3, _EVERY_20_MIN),
        forever=True,
    ),
    Example(
        "The days generated make a difference because of WKST (MO)",
        "1997-08-05T09:00",
        "FREQ=WEEKLY;INTERVAL=2;COUNT=4;BYDAY=TU,SU;WKST=MO",
        ((1997, "EDT", _NINE, "Aug 5,10,19,24"),),
    ),
    Example(
        "The days generated make a difference because of WKST (SU)",
        "1997-08-05T09:00",
        "FREQ=WEEKLY;INTERVAL=2;COUNT=4;BYDAY=TU,SU;WKST=SU",
        ((1997, "EDT", _NINE, "Aug 5,17,19,31"),),
    ),
    Example(
        "An invalid date (February 30) is ignored",
        "2007-01-15T09:00",
        "FREQ=MONTHLY;BYMONTHDAY=15,30;COUNT=5",
        (
            (2007, "EST", _NINE, "Jan 15,30; Feb 15"),
            (2007, "EDT", _NINE, "Mar 15,30"),
        ),
    ),
)
