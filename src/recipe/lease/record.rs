//! kazoo's lease record: the JSON in `<path>/lease_holder` and its timestamps (naive
//! UTC, `%Y-%m-%dT%H:%M:%S`, whole seconds), written and read without a clock.

use alloc::format;
use alloc::string::String;
use core::time::Duration;

use crate::recipe::discovery::json::{write_string, Reader};
use crate::time::{civil_from_days, days_from_civil};

/// The record format version kazoo writes (`NonBlockingLease._version`).
pub const VERSION: i64 = 1;

/// The latest end a record can name: 9999-12-31T23:59:59 (Python's `datetime.MAXYEAR`).
pub const MAX_END: Duration = Duration::from_secs(253_402_300_799);

/// The current holder of a lease, as its record names it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Holder {
    /// The holder's identifier (kazoo's `identifier`, by default its host name).
    pub identifier: String,
    /// When its lease ends: time since the Unix epoch, UTC, whole seconds.
    pub end: Duration,
}

/// What a record says: a holder, or a record of another format version (kazoo leaves
/// such a lease alone: "we need an upgrade, let someone else take the lease").
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Record {
    /// A version-1 record.
    Holder(Holder),
    /// A record of this other version.
    OtherVersion(i64),
}

/// `t` (since the Unix epoch, UTC; capped at [`MAX_END`]) in kazoo's timestamp format,
/// its fraction of a second dropped as `strftime` drops it.
///
/// ```
/// use core::time::Duration;
/// use zk_recipes::recipe::lease::{format_time, parse_time};
/// let t = Duration::from_secs(1_764_461_565) + Duration::from_millis(900);
/// assert_eq!(format_time(t), "2025-11-30T00:12:45");
/// assert_eq!(parse_time("2025-11-30T00:12:45"), Some(Duration::from_secs(1_764_461_565)));
/// ```
pub fn format_time(t: Duration) -> String {
    let s = t.min(MAX_END).as_secs() as i64;
    let (y, mo, d) = civil_from_days(s.div_euclid(86_400));
    let r = s.rem_euclid(86_400);
    format!(
        "{y:04}-{mo:02}-{d:02}T{:02}:{:02}:{:02}",
        r / 3600,
        r / 60 % 60,
        r % 60
    )
}

/// A timestamp in kazoo's format (`%Y-%m-%dT%H:%M:%S`; as `strptime`, fields of fewer
/// digits are read too), as time since the Unix epoch; a time before the epoch reads
/// as the epoch. `None` if it is not a valid date and time.
pub fn parse_time(text: &str) -> Option<Duration> {
    let (date, time) = text.split_once('T')?;
    let mut f = [0i64; 6];
    let parts = date.split('-').chain(time.split(':'));
    let mut n = 0;
    for (i, p) in parts.enumerate() {
        let width = if i == 0 { 4 } else { 2 };
        if i >= 6 || p.is_empty() || p.len() > width || !p.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        f[i] = p.parse().ok()?;
        n = i + 1;
    }
    let [y, mo, d, h, mi, s] = f;
    let days = days_from_civil(y, mo, d);
    let valid = n == 6
        && y >= 1
        && (1..=12).contains(&mo)
        && civil_from_days(days) == (y, mo, d)
        && h < 24
        && mi < 60
        && s < 60;
    if !valid {
        return None;
    }
    let secs = days * 86_400 + h * 3600 + mi * 60 + s;
    Some(Duration::from_secs(u64::try_from(secs).unwrap_or(0)))
}

/// The record kazoo writes for `identifier`'s lease ending at `end`:
/// `{"version": 1, "holder": "<identifier>", "end": "<end>"}` (`json.dumps`' spacing,
/// and its `ensure_ascii`: a character beyond ASCII as `\uXXXX`, in UTF-16 units).
pub fn encode_record(identifier: &str, end: Duration) -> String {
    let mut holder = String::new();
    write_string(&mut holder, identifier);
    let mut out = format!("{{\"version\": {VERSION}, \"holder\": ");
    for c in holder.chars() {
        if c.is_ascii() {
            out.push(c);
        } else {
            for unit in c.encode_utf16(&mut [0; 2]) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        }
    }
    out.push_str(", \"end\": \"");
    out.push_str(&format_time(end));
    out.push_str("\"}");
    out
}

/// Reads a record (what [`encode_record`] writes); `None` if it is not kazoo's format (not a JSON object, or a
/// version-1 record without a string `holder` and a valid `end`).
pub fn decode_record(data: &[u8]) -> Option<Record> {
    let mut r = Reader::new(data);
    let (mut version, mut holder, mut end) = (None, None, None);
    r.expect(b'{', "an object").ok()?;
    r.members(|r, key| {
        match key.as_str() {
            "version" => version = Some(r.integer()?),
            "holder" => holder = Some(r.string()?),
            "end" => end = Some(r.string()?),
            _ => drop(r.raw(1)?),
        }
        Ok(())
    })
    .ok()?;
    r.end().ok()?;
    match version? {
        VERSION => Some(Record::Holder(Holder {
            identifier: holder?,
            end: parse_time(&end?)?,
        })),
        other => Some(Record::OtherVersion(other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_round_trip_across_leap_days_and_centuries() {
        for s in [
            0,
            951_782_400,
            4_107_456_000,
            1_709_164_800,
            MAX_END.as_secs(),
        ] {
            let t = Duration::from_secs(s);
            assert_eq!(parse_time(&format_time(t)), Some(t), "{}", format_time(t));
        }
        assert_eq!(
            format_time(Duration::from_secs(951_782_400)),
            "2000-02-29T00:00:00"
        );
        assert_eq!(parse_time("2001-02-29T00:00:00"), None);
        assert_eq!(parse_time("2025-13-01T00:00:00"), None);
        assert_eq!(parse_time("2025-01-01T24:00:00"), None);
        assert_eq!(parse_time("2025-01-01T00:00"), None);
        assert_eq!(parse_time("1969-12-31T23:59:59"), Some(Duration::ZERO));
        assert_eq!(
            parse_time("2025-1-2T3:4:5"),
            parse_time("2025-01-02T03:04:05")
        );
    }

    #[test]
    fn records_are_kazoos() {
        let end = Duration::from_secs(1_764_461_565);
        let text = encode_record("host \"a\"", end);
        assert_eq!(
            text,
            r#"{"version": 1, "holder": "host \"a\"", "end": "2025-11-30T00:12:45"}"#
        );
        let holder = Holder {
            identifier: "host \"a\"".into(),
            end,
        };
        assert_eq!(decode_record(text.as_bytes()), Some(Record::Holder(holder)));
        assert_eq!(
            decode_record(br#"{"version": 2, "x": [1, {"y": null}]}"#),
            Some(Record::OtherVersion(2))
        );
        assert_eq!(decode_record(br#"{"version": 1, "holder": "a"}"#), None);
        assert_eq!(decode_record(b"not json"), None);
        // `json.dumps({"holder": "h\u00e9\U0001f600"})`, as Python writes it.
        let text = encode_record("h\u{e9}\u{1f600}", end);
        assert!(
            text.contains(r#""holder": "h\u00e9\ud83d\ude00""#),
            "{text}"
        );
        let Some(Record::Holder(h)) = decode_record(text.as_bytes()) else {
            panic!("{text}")
        };
        assert_eq!(h.identifier, "h\u{e9}\u{1f600}");
        assert_eq!(
            decode_record(br#"{"version": 1, "holder": "a", "end": "soon"}"#),
            None
        );
    }
}
