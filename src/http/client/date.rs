//! HTTP-dates (RFC 9110, section 5.6.7) in the three forms recipients must accept.

use super::parse::saturating_digits;

const DAYS: [&str; 7] = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"];
const LONG_DAYS: [&str; 7] = [
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
];
const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// Seconds since the Unix epoch of an HTTP-date; dates before 1970 count as 0.
pub(super) fn http_date(s: &str) -> Option<u64> {
    if let Some((day, rest)) = s.split_once(", ") {
        if DAYS.contains(&day) {
            return imf_fixdate(rest);
        }
        if LONG_DAYS.contains(&day) {
            return rfc850(rest);
        }
        return None;
    }
    asctime(s)
}

/// `06 Nov 1994 08:49:37 GMT`, after the day name.
fn imf_fixdate(s: &str) -> Option<u64> {
    let b = s.as_bytes();
    if b.len() != 24 || b[2] != b' ' || b[6] != b' ' || b[11] != b' ' || &b[20..] != b" GMT" {
        return None;
    }
    let day = number(&b[0..2])?;
    let month = month(&b[3..6])?;
    let year = number(&b[7..11])?;
    let seconds = time_of_day(&b[12..20])?;
    to_unix(year, month, day, seconds)
}

/// `06-Nov-94 08:49:37 GMT`, after the day name.
fn rfc850(s: &str) -> Option<u64> {
    let b = s.as_bytes();
    if b.len() != 22 || b[2] != b'-' || b[6] != b'-' || b[9] != b' ' || &b[18..] != b" GMT" {
        return None;
    }
    let day = number(&b[0..2])?;
    let month = month(&b[3..6])?;
    let yy = number(&b[7..9])?;
    let year = if yy >= 70 { 1900 + yy } else { 2000 + yy };
    let seconds = time_of_day(&b[10..18])?;
    to_unix(year, month, day, seconds)
}

/// `Sun Nov  6 08:49:37 1994`.
fn asctime(s: &str) -> Option<u64> {
    let b = s.as_bytes();
    if b.len() != 24 || b[3] != b' ' || b[7] != b' ' || b[10] != b' ' || b[19] != b' ' {
        return None;
    }
    if !DAYS.iter().any(|d| d.as_bytes() == &b[0..3]) {
        return None;
    }
    let month = month(&b[4..7])?;
    let day = match b[8] {
        b' ' => number(&b[9..10])?,
        _ => number(&b[8..10])?,
    };
    let seconds = time_of_day(&b[11..19])?;
    let year = number(&b[20..24])?;
    to_unix(year, month, day, seconds)
}

fn number(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(saturating_digits(digits))
}

fn month(name: &[u8]) -> Option<u64> {
    let index = MONTHS.iter().position(|m| m.as_bytes() == name)?;
    Some(index as u64 + 1)
}

/// `08:49:37` as seconds into the day; a leap second (60) is allowed.
fn time_of_day(b: &[u8]) -> Option<u64> {
    if b.len() != 8 || b[2] != b':' || b[5] != b':' {
        return None;
    }
    let (h, m, s) = (number(&b[0..2])?, number(&b[3..5])?, number(&b[6..8])?);
    if h > 23 || m > 59 || s > 60 {
        return None;
    }
    Some(h * 3600 + m * 60 + s)
}

fn to_unix(year: u64, month: u64, day: u64, seconds: u64) -> Option<u64> {
    let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    let days_in_month = match month {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    };
    if day == 0 || day > days_in_month {
        return None;
    }
    let days = days_from_civil(year as i64, month as i64, day as i64);
    let seconds = days * 86_400 + seconds as i64;
    Some(u64::try_from(seconds).unwrap_or(0))
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}
