//! `Retry-After` (RFC 9110, section 10.2.3): delay-seconds or an HTTP-date. The server
//! layer writes delay-seconds; the client layer reads both, the dates through
//! `httpdate`.

use std::time::{Duration, UNIX_EPOCH};

use super::{saturating_digits, seconds_up};
use crate::decision::Limited;

/// The `Retry-After` of a "not now" denial, in delay-seconds: its wait rounded up, so
/// never earlier than `t`, and at least 1; `None` when it waits for a release, which
/// no number of seconds promises.
pub(crate) fn retry_after_seconds(limited: &Limited) -> Option<u64> {
    limited.retry_after().map(|d| seconds_up(d).max(1))
}

/// Reads a `Retry-After` value: delay-seconds (`120`), or an HTTP-date in any of the
/// three forms RFC 9110 asks recipients to accept (`Sun, 06 Nov 1994 08:49:37 GMT`,
/// the obsolete RFC 850 `Sunday, 06-Nov-94 08:49:37 GMT` and asctime's
/// `Sun Nov  6 08:49:37 1994`), counted from `now_since_epoch`, the current Unix time.
///
/// A date in the past gives zero. A two-digit year is 19xx from 70 on and 20xx below.
/// Delay-seconds beyond `u64::MAX` saturate.
///
/// # Errors
///
/// `None` for anything else: a negative or fractional number, a malformed or
/// impossible date (31 April, a weekday that is not the date's, a leap second), a year
/// before 1970 or after 9999, trailing text.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tollgate::http::wire::retry_after;
///
/// assert_eq!(retry_after("120", Duration::ZERO), Some(Duration::from_secs(120)));
/// let now = Duration::from_secs(784_111_770); // 08:49:30 on 6 November 1994
/// let date = retry_after("Sun, 06 Nov 1994 08:49:37 GMT", now);
/// assert_eq!(date, Some(Duration::from_secs(7)));
/// assert_eq!(retry_after("soon", now), None);
/// ```
pub fn retry_after(value: &str, now_since_epoch: Duration) -> Option<Duration> {
    let value = value.trim_matches([' ', '\t']);
    if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        return Some(Duration::from_secs(saturating_digits(value.as_bytes())));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    // httpdate reads no year before 1970.
    let at = at.duration_since(UNIX_EPOCH).ok()?;
    Some(at.saturating_sub(now_since_epoch))
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOV_6_1994: u64 = 784_111_777; // 08:49:37 GMT

    /// The Unix time of an HTTP-date.
    fn unix(date: &str) -> Option<u64> {
        retry_after(date, Duration::ZERO).map(|d| d.as_secs())
    }

    #[test]
    fn retry_after_seconds_round_up_to_at_least_one() {
        let limited = |ms| Limited::new(Duration::from_millis(ms), 10, 0, Duration::ZERO);
        assert_eq!(retry_after_seconds(&limited(0)), Some(1));
        assert_eq!(retry_after_seconds(&limited(1)), Some(1));
        assert_eq!(retry_after_seconds(&limited(2_500)), Some(3));
        let forever = Limited::new(Duration::MAX, 1, 0, Duration::MAX);
        assert_eq!(
            retry_after_seconds(&forever),
            forever.retry_after().map(seconds_up)
        );
        let release = Limited::on_release(1, 0);
        assert_eq!(retry_after_seconds(&release), None);
    }

    #[test]
    fn retry_after_delay_seconds() {
        let now = Duration::from_secs(5);
        assert_eq!(retry_after("0", now), Some(Duration::ZERO));
        assert_eq!(retry_after("120", now), Some(Duration::from_secs(120)));
        assert_eq!(retry_after(" 7\t", now), Some(Duration::from_secs(7)));
        assert_eq!(
            retry_after("99999999999999999999999", now),
            Some(Duration::from_secs(u64::MAX))
        );
    }

    #[test]
    fn retry_after_rejects_garbage() {
        let now = Duration::ZERO;
        for bad in [
            "",
            " ",
            "-1",
            "1.5",
            "+3",
            "3s",
            "0x10",
            "soon",
            "1 2",
            "١٢",
            "NaN",
            "Sun, 06 Nov 1994 08:49:37 UTC",
            "Sun, 6 Nov 1994 08:49:37 GMT",
            "Sun, 31 Apr 1994 08:49:37 GMT",
            "Sun, 29 Feb 1900 08:49:37 GMT",
            "Sun, 06 Nov 1994 24:00:00 GMT",
            "Sun, 06 Nov 1994 08:60:00 GMT",
            "Sun, 06 Nov 1994 08:49:37 GMTX",
            "Sun, 06 Nev 1994 08:49:37 GMT",
            "Dim, 06 Nov 1994 08:49:37 GMT",
            "Sun, 06 Nov 19a4 08:49:37 GMT",
            "Sunday, 06-Nov-94 08:49:37",
            "Sun Nov 6 08:49:37 1994",
            "Sun, 00 Nov 1994 08:49:37 GMT",
            "Sun,",
            ", ",
            "Sun, ",
            "Sun, 06 Nov 1994 08:49:37 GMT\u{e9}",
            "Sun, 06 Nov 1994 08:49:\u{e9}7 GM",
        ] {
            assert_eq!(retry_after(bad, now), None, "{bad:?}");
        }
    }

    #[test]
    fn retry_after_http_date_in_all_three_forms() {
        let now = Duration::from_secs(NOV_6_1994 - 10);
        let ten = Some(Duration::from_secs(10));
        assert_eq!(retry_after("Sun, 06 Nov 1994 08:49:37 GMT", now), ten);
        assert_eq!(retry_after("Sunday, 06-Nov-94 08:49:37 GMT", now), ten);
        assert_eq!(retry_after("Sun Nov  6 08:49:37 1994", now), ten);
        assert_eq!(retry_after(" Sun Nov  6 08:49:37 1994\t", now), ten);
    }

    #[test]
    fn retry_after_date_in_the_past_is_zero() {
        let now = Duration::from_secs(NOV_6_1994 + 3600);
        assert_eq!(
            retry_after("Sun, 06 Nov 1994 08:49:37 GMT", now),
            Some(Duration::ZERO)
        );
        assert_eq!(
            retry_after("Thu, 01 Jan 1970 00:00:00 GMT", now),
            Some(Duration::ZERO)
        );
    }

    #[test]
    fn http_dates_match_known_unix_times() {
        assert_eq!(unix("Thu, 01 Jan 1970 00:00:00 GMT"), Some(0));
        assert_eq!(unix("Sun, 06 Nov 1994 08:49:37 GMT"), Some(NOV_6_1994));
        assert_eq!(unix("Tue, 29 Feb 2000 12:00:00 GMT"), Some(951_825_600));
        assert_eq!(unix("Tue, 14 Nov 2023 22:13:20 GMT"), Some(1_700_000_000));
        assert_eq!(unix("Fri, 31 Dec 9999 23:59:59 GMT"), Some(253_402_300_799));
        // RFC 850's two-digit years: 69 is 2069, 70 is 1970.
        assert_eq!(
            unix("Wednesday, 06-Nov-69 00:00:00 GMT"),
            Some(3_150_921_600)
        );
        assert_eq!(unix("Thursday, 01-Jan-70 00:00:00 GMT"), Some(0));
        // asctime, a day of two digits.
        assert_eq!(
            unix("Wed Nov 16 08:49:37 1994"),
            Some(NOV_6_1994 + 10 * 86_400)
        );
    }

    /// Newly rejected with httpdate, which checks the whole date: the hand parser took
    /// any weekday name, a leap second, and a year before 1970 (as zero wait).
    #[test]
    fn dates_httpdate_rejects() {
        for bad in [
            // 6 November 1994 was a Sunday.
            "Mon, 06 Nov 1994 08:49:37 GMT",
            "Monday, 06-Nov-94 08:49:37 GMT",
            "Mon Nov  6 08:49:37 1994",
            "Sun, 06 Nov 1994 23:59:60 GMT",
            "Tue, 01 Jan 1901 00:00:00 GMT",
            "Sat, 01 Jan 10000 00:00:00 GMT",
        ] {
            assert_eq!(unix(bad), None, "{bad}");
        }
    }
}
