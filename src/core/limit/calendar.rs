//! Calendar periods: a fixed window's slots as days, weeks or months of
//! one time zone, numbered from 1970 so that every locker computing from
//! the same wall clock and zone gets the same numbers.
//!
//! A calendar slot has no one length: a day with a change of daylight
//! saving time lasts 23 or 25 hours, a month 28 to 31 days. So a slot is
//! named by its number and bounded by the first instants of its period
//! and of the next, each found through the zone's rules. A week starts on
//! Monday at 00:00. Slot 0 holds every instant before slot 1, so no
//! `now` (even one before 1970 in a zone west of Greenwich) falls outside
//! a slot.
//!
//! Pure: the zone comes resolved (the config finds it in the time zone
//! database bundled with the binary); this module reads no clock and no
//! file, and only computes with the zone's rules.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Mutex, OnceLock};

use jiff::civil::{Date, DateTime};
use jiff::tz::TimeZone;
use jiff::Timestamp;

use crate::core::time::{Nanos, NANOS_PER_SEC};

/// Which calendar period a slot is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Period {
    Day,
    /// Monday 00:00 to the next Monday 00:00.
    Week,
    Month,
}

impl Period {
    /// The period named as in config files.
    pub fn parse(name: &str) -> Option<Period> {
        match name {
            "day" => Some(Period::Day),
            "week" => Some(Period::Week),
            "month" => Some(Period::Month),
            _ => None,
        }
    }

    /// The name used in config files and stats.
    pub fn name(self) -> &'static str {
        match self {
            Period::Day => "day",
            Period::Week => "week",
            Period::Month => "month",
        }
    }

    /// The longest the period lasts, in nanoseconds: its usual length and
    /// two hours for a change of offset (the largest any zone makes in a
    /// day). An upper bound for what a slot length bounds (how long peers
    /// remember a run), never a boundary.
    fn longest(self) -> Nanos {
        let days = match self {
            Period::Day => 1,
            Period::Week => 7,
            Period::Month => 31,
        };
        (days * 86_400 + 2 * 3_600) * NANOS_PER_SEC
    }
}

/// What a calendar slot is: a period of a time zone.
struct Rules {
    period: Period,
    zone_name: Box<str>,
    zone: TimeZone,
}

/// The rules made so far, one per period and zone name.
type KeptRules = HashMap<(Period, Box<str>), &'static Rules>;

/// Calendar slots: a period in a time zone. Copied as freely as a
/// `Quota`: it refers to rules kept once per period and zone for the
/// life of the process (a reload naming the same zone finds them again).
#[derive(Clone, Copy)]
pub struct Calendar(&'static Rules);

/// The first day of slot 0 of every period's numbering, and the days
/// from it back to the Monday its weeks are numbered from.
const EPOCH_YEAR: i64 = 1970;
const EPOCH_WEEK_OFFSET: i64 = 3;

impl Calendar {
    /// Slots of `period` in `zone`, which the caller resolved from the
    /// name `zone_name`.
    pub fn new(period: Period, zone_name: &str, zone: TimeZone) -> Calendar {
        static KEPT: OnceLock<Mutex<KeptRules>> = OnceLock::new();
        let mut kept = KEPT.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner());
        let rules = kept
            .entry((period, zone_name.into()))
            .or_insert_with(|| Box::leak(Box::new(Rules { period, zone_name: zone_name.into(), zone })));
        Calendar(rules)
    }

    /// The period.
    pub fn period(self) -> Period {
        self.0.period
    }

    /// The time zone's name, as configured.
    pub fn zone_name(self) -> &'static str {
        &self.0.zone_name
    }

    /// The longest a slot lasts (see `Period::longest`).
    pub fn longest(self) -> Nanos {
        self.0.period.longest()
    }

    /// The number of the slot `now` falls in: days, weeks (from Monday
    /// 1969-12-29) or months since 1970 began in the zone.
    pub fn slot_of(self, now: Nanos) -> u64 {
        let Ok(at) = Timestamp::from_nanosecond(i128::from(now)) else { return u64::MAX };
        let date = self.0.zone.to_datetime(at).date();
        let n = match self.0.period {
            Period::Day => days_since_epoch(date),
            Period::Week => (days_since_epoch(date) + EPOCH_WEEK_OFFSET).div_euclid(7),
            Period::Month => (i64::from(date.year()) - EPOCH_YEAR) * 12 + i64::from(date.month()) - 1,
        };
        u64::try_from(n).unwrap_or(0)
    }

    /// When slot number `slot` begins: midnight of its first day in the
    /// zone (the first instant of that day, when midnight itself is
    /// skipped). Slot 0 begins at the epoch; a slot past the calendar's
    /// range never begins.
    pub fn slot_start(self, slot: u64) -> Nanos {
        if slot == 0 {
            return 0;
        }
        let Ok(slot) = i64::try_from(slot) else { return Nanos::MAX };
        let first_day = match self.0.period {
            Period::Day => day_after_epoch(slot),
            Period::Week => day_after_epoch(slot.saturating_mul(7).saturating_sub(EPOCH_WEEK_OFFSET)),
            Period::Month => {
                let year = EPOCH_YEAR + slot / 12;
                i16::try_from(year).ok().and_then(|y| Date::new(y, (slot % 12 + 1) as i8, 1).ok())
            }
        };
        let Some(day) = first_day else { return Nanos::MAX };
        let midnight = DateTime::from(day);
        match self.0.zone.to_timestamp(midnight) {
            Ok(at) => u64::try_from(at.as_nanosecond().max(0)).unwrap_or(Nanos::MAX),
            Err(_) => Nanos::MAX,
        }
    }

    /// When slot number `slot` ends: the start of the next.
    pub fn slot_end(self, slot: u64) -> Nanos {
        self.slot_start(slot.saturating_add(1))
    }
}

/// Days from 1970-01-01 to `date` (negative before it), by the
/// proleptic Gregorian calendar (H. Hinnant's `days_from_civil`).
fn days_since_epoch(date: Date) -> i64 {
    let (m, d) = (i64::from(date.month()), i64::from(date.day()));
    let y = i64::from(date.year()) - i64::from(m <= 2);
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (m + if m > 2 { -3 } else { 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date `days` after 1970-01-01, if the calendar reaches it (the
/// inverse of `days_since_epoch`).
fn day_after_epoch(days: i64) -> Option<Date> {
    let z = days.checked_add(719_468)?;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    Date::new(i16::try_from(y).ok()?, m as i8, d as i8).ok()
}

impl PartialEq for Calendar {
    fn eq(&self, other: &Calendar) -> bool {
        self.0.period == other.0.period && self.0.zone_name == other.0.zone_name
    }
}

impl Eq for Calendar {}

impl fmt::Debug for Calendar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} in {}", self.0.period.name(), self.0.zone_name)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Slots of `period` in the zone named `zone`, from the bundled database.
    pub(crate) fn calendar(period: Period, zone: &str) -> Calendar {
        Calendar::new(period, zone, jiff::tz::db().get(zone).unwrap())
    }

    /// The instant of the civil time `civil` (`2026-01-31T23:59:59`) in `zone`.
    pub(crate) fn at(zone: &str, civil: &str) -> Nanos {
        let dt: DateTime = civil.parse().unwrap();
        let ts = jiff::tz::db().get(zone).unwrap().to_timestamp(dt).unwrap();
        u64::try_from(ts.as_nanosecond()).unwrap()
    }

    const HOUR: Nanos = 3_600 * NANOS_PER_SEC;

    #[test]
    fn a_month_begins_at_midnight_of_the_first_in_its_zone() {
        for zone in ["Europe/Berlin", "America/New_York", "UTC"] {
            let c = calendar(Period::Month, zone);
            let feb = at(zone, "2026-02-01T00:00:00");
            let jan = c.slot_of(feb - 1);
            assert_eq!(c.slot_of(feb), jan + 1, "{zone}");
            assert_eq!((c.slot_start(jan + 1), c.slot_end(jan)), (feb, feb), "{zone}");
            assert_eq!(c.slot_start(jan), at(zone, "2026-01-01T00:00:00"), "{zone}");
        }
        // Berlin's month begins an hour before UTC's, New York's five after.
        let utc = at("UTC", "2026-02-01T00:00:00");
        assert_eq!(at("Europe/Berlin", "2026-02-01T00:00:00"), utc - HOUR);
        assert_eq!(at("America/New_York", "2026-02-01T00:00:00"), utc + 5 * HOUR);
        // Months since 1970 began in the zone: peers compute the same number.
        assert_eq!(calendar(Period::Month, "Europe/Berlin").slot_of(utc), 56 * 12 + 1);
        assert_eq!(calendar(Period::Month, "America/New_York").slot_of(utc), 56 * 12);
    }

    #[test]
    fn a_month_lasts_28_to_31_days() {
        let c = calendar(Period::Month, "UTC");
        let days = |civil: &str| {
            let slot = c.slot_of(at("UTC", civil));
            (c.slot_end(slot) - c.slot_start(slot)) / (24 * HOUR)
        };
        assert_eq!([days("2026-02-10T00:00:00"), days("2028-02-10T00:00:00")], [28, 29]);
        assert_eq!([days("2026-04-10T00:00:00"), days("2026-12-31T23:59:59")], [30, 31]);
    }

    #[test]
    fn a_day_of_a_daylight_saving_change_lasts_23_or_25_hours() {
        let length = |zone: &str, civil: &str| {
            let c = calendar(Period::Day, zone);
            let slot = c.slot_of(at(zone, civil));
            (c.slot_end(slot) - c.slot_start(slot)) / HOUR
        };
        assert_eq!(length("Europe/Berlin", "2026-03-29T12:00:00"), 23);
        assert_eq!(length("Europe/Berlin", "2026-10-25T12:00:00"), 25);
        assert_eq!(length("Europe/Berlin", "2026-10-26T12:00:00"), 24);
        assert_eq!(length("America/New_York", "2026-03-08T12:00:00"), 23);
        assert_eq!(length("America/New_York", "2026-11-01T12:00:00"), 25);
        // A month holding a change is an hour short or long.
        let c = calendar(Period::Month, "Europe/Berlin");
        let march = c.slot_of(at("Europe/Berlin", "2026-03-15T00:00:00"));
        assert_eq!(c.slot_end(march) - c.slot_start(march), 31 * 24 * HOUR - HOUR);
    }

    #[test]
    fn a_week_starts_on_monday_at_midnight() {
        let c = calendar(Period::Week, "Europe/Berlin");
        // Wednesday 2026-12-02: its week began Monday 2026-11-30.
        let slot = c.slot_of(at("Europe/Berlin", "2026-12-02T15:00:00"));
        assert_eq!(c.slot_start(slot), at("Europe/Berlin", "2026-11-30T00:00:00"));
        assert_eq!(c.slot_end(slot), at("Europe/Berlin", "2026-12-07T00:00:00"));
        assert_eq!(c.slot_of(at("Europe/Berlin", "2026-12-06T23:59:59")), slot, "Sunday is the week's last day");
        // 1970-01-01 was a Thursday: week 0 ends on Monday 1970-01-05.
        let utc = calendar(Period::Week, "UTC");
        assert_eq!((utc.slot_of(0), utc.slot_start(1)), (0, 4 * 24 * HOUR));
    }

    #[test]
    fn days_count_from_1970_and_back() {
        for days in [0, 1, 59, 365, 10_957, 20_000, 2_932_896] {
            let date = day_after_epoch(days).unwrap();
            assert_eq!(days_since_epoch(date), days, "{date}");
        }
        assert_eq!(day_after_epoch(20_421).unwrap(), Date::new(2025, 11, 29).unwrap());
        let c = calendar(Period::Day, "UTC");
        assert_eq!(c.slot_of(at("UTC", "2026-11-29T18:00:00")), 20_786);
        assert_eq!(c.slot_start(u64::MAX), Nanos::MAX, "past the calendar's range, never");
    }

    #[test]
    fn a_zone_west_of_greenwich_has_every_instant_in_a_slot() {
        // 1970-01-01T00:00Z is still 1969 in New York: slot 0 holds it.
        let c = calendar(Period::Month, "America/New_York");
        assert_eq!((c.slot_of(0), c.slot_start(0)), (0, 0));
        assert_eq!(c.slot_end(0), at("America/New_York", "1970-02-01T00:00:00"));
    }
}
