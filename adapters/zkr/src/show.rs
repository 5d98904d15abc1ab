//! Output: writing to standard output (a closed pipe ends zkr quietly), and how node
//! data, Stats, times and sessions are shown, as text and as JSON.

use std::io::{self, Write};
use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use serde_json::{json, Value};

use crate::zk::Stat;

/// Writes to standard output; a closed pipe (`zkr ls / | head -1`) ends zkr quietly.
pub fn out(bytes: &[u8]) -> Result<(), u8> {
    let mut stdout = io::stdout().lock();
    match stdout.write_all(bytes).and_then(|()| stdout.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Err(crate::signal_exit(libc::SIGPIPE)),
        Err(e) => Err(crate::fail(format!("standard output: {e}"))),
    }
}

/// Writes `text` and a newline.
pub fn line(text: &str) -> Result<(), u8> {
    out(format!("{text}\n").as_bytes())
}

/// Writes `value` as one line of JSON.
pub fn json_line(value: &Value) -> Result<(), u8> {
    line(&value.to_string())
}

/// Bytes as lower-case hex.
pub fn hex(data: &[u8]) -> String {
    data.iter().map(|b| format!("{b:02x}")).collect()
}

/// Bytes as standard base64 (with padding).
pub fn base64(data: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(data)
}

/// A session id as ZooKeeper's tools show it: `0x` and hex.
pub fn session(id: i64) -> String {
    format!("0x{id:x}")
}

/// A time in ms since the epoch (a Stat's `ctime`, `mtime`) as UTC, RFC 3339:
/// `2026-11-29T08:41:07.123Z`.
pub fn utc(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let (days, day_secs) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, mo, d) = zk_recipes_blocking::zk_recipes::time::civil_from_days(days);
    format!(
        "{y:04}-{mo:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        day_secs / 3600,
        day_secs / 60 % 60,
        day_secs % 60,
        ms.rem_euclid(1000)
    )
}

/// Now, in ms since the epoch (this machine's clock).
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// How long ago `ms` was, by this machine's clock (`0s` for a time ahead of it):
/// `42s`, `5m 3s`, `2h 10m`, `3d 4h`.
pub fn age(ms: i64) -> String {
    let s = (now_ms() - ms).max(0) / 1000;
    match s {
        0..=59 => format!("{s}s"),
        60..=3_599 => format!("{}m {}s", s / 60, s % 60),
        3_600..=86_399 => format!("{}h {}m", s / 3_600, s / 60 % 60),
        _ => format!("{}d {}h", s / 86_400, s / 3_600 % 24),
    }
}

/// A Stat as `zkCli.sh stat` prints it, times in UTC.
pub fn stat_text(stat: &Stat) -> String {
    format!(
        "cZxid = 0x{:x}\nctime = {}\nmZxid = 0x{:x}\nmtime = {}\npZxid = 0x{:x}\n\
         cversion = {}\ndataVersion = {}\naclVersion = {}\nephemeralOwner = 0x{:x}\n\
         dataLength = {}\nnumChildren = {}\n",
        stat.czxid,
        utc(stat.ctime),
        stat.mzxid,
        utc(stat.mtime),
        stat.pzxid,
        stat.cversion,
        stat.version,
        stat.aversion,
        stat.ephemeral_owner,
        stat.data_length,
        stat.num_children
    )
}

/// A Stat as JSON: the library's field names, times in ms and as UTC text, the owner
/// session as `0x…` text (JSON numbers lose precision past 2^53).
pub fn stat_json(stat: &Stat) -> Value {
    json!({
        "czxid": stat.czxid,
        "mzxid": stat.mzxid,
        "pzxid": stat.pzxid,
        "ctime": stat.ctime,
        "ctime_utc": utc(stat.ctime),
        "mtime": stat.mtime,
        "mtime_utc": utc(stat.mtime),
        "version": stat.version,
        "cversion": stat.cversion,
        "aversion": stat.aversion,
        "ephemeral_owner": session(stat.ephemeral_owner),
        "data_length": stat.data_length,
        "num_children": stat.num_children,
    })
}

/// Node data as JSON: `data` the text if it is UTF-8 (else null), `data_base64` always.
pub fn data_json(data: &[u8]) -> (Value, Value) {
    let text = std::str::from_utf8(data).map_or(Value::Null, Value::from);
    (text, Value::from(base64(data)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_times_as_rfc_3339() {
        assert_eq!(utc(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(utc(951_782_400_123), "2000-02-29T00:00:00.123Z");
        assert_eq!(utc(1_795_941_667_005), "2026-11-29T08:41:07.005Z");
        assert_eq!(utc(-1), "1969-12-31T23:59:59.999Z");
    }

    #[test]
    fn bytes_as_hex_and_base64() {
        assert_eq!(hex(b"\x00ab\xff"), "006162ff");
        assert_eq!(base64(b"abc\n"), "YWJjCg==");
        assert_eq!(session(0x0010_000a_1b2c_0001), "0x10000a1b2c0001");
    }
}
