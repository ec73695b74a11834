//! gosling patch: the `Date` header's IMF-fixdate (RFC 9110 §5.6.7), in place of the
//! `httpdate` crate: `Sun, 06 Nov 1994 08:49:37 GMT`, always UTC.

use std::time::{SystemTime, UNIX_EPOCH};

/// The (year, month 1–12, day 1–31) of a count of days since 1970-01-01 (proleptic
/// Gregorian; the era-based method of Howard Hinnant's "chrono-compatible date algorithms").
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + if month <= 2 { 1 } else { 0 };
    (year, month, day)
}

/// `t` as an IMF-fixdate; times before 1970 are written as 1970-01-01.
pub fn imf_fixdate(t: SystemTime) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"]; // 1970-01-01 was a Thursday
    const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    let secs = t.duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0) as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (year, month, day) = civil_from_days(days);
    format!(
        "{}, {:02} {} {:04} {:02}:{:02}:{:02} GMT",
        DAYS[days.rem_euclid(7) as usize],
        day,
        MONTHS[month as usize - 1],
        year,
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn at(secs: u64) -> String {
        imf_fixdate(UNIX_EPOCH + Duration::from_secs(secs))
    }

    #[test]
    fn formats_known_dates() {
        assert_eq!(at(0), "Thu, 01 Jan 1970 00:00:00 GMT");
        assert_eq!(at(784_111_777), "Sun, 06 Nov 1994 08:49:37 GMT");
        assert_eq!(at(951_782_400), "Tue, 29 Feb 2000 00:00:00 GMT");
        assert_eq!(at(1_709_251_199), "Thu, 29 Feb 2024 23:59:59 GMT");
        assert_eq!(at(4_102_444_800), "Fri, 01 Jan 2100 00:00:00 GMT");
        assert_eq!(imf_fixdate(UNIX_EPOCH - Duration::from_secs(5)), "Thu, 01 Jan 1970 00:00:00 GMT");
    }
}
