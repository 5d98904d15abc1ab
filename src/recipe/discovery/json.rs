//! The small, bounded JSON reader and writer the instance format needs: objects,
//! arrays, strings with every escape (`\uXXXX` surrogate pairs included), integers,
//! booleans and `null`; any other value (a payload) is validated and kept as its raw
//! text. Nesting deeper than [`MAX_DEPTH`] is refused; nothing here panics or
//! allocates more than the input's size.

use alloc::string::String;

use super::error::InstanceError;

/// The deepest nesting accepted in a payload.
pub const MAX_DEPTH: usize = 32;

/// A cursor over JSON text.
pub(crate) struct Reader<'a> {
    text: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(text: &'a [u8]) -> Self {
        Reader { text, at: 0 }
    }

    fn fail(&self, what: &'static str) -> InstanceError {
        InstanceError::Syntax { at: self.at, what }
    }

    pub(super) fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.text.get(self.at) {
            self.at += 1;
        }
    }

    /// The next non-blank byte, not consumed.
    pub(super) fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.text.get(self.at).copied()
    }

    pub(crate) fn expect(&mut self, b: u8, what: &'static str) -> Result<(), InstanceError> {
        if self.peek() == Some(b) {
            self.at += 1;
            Ok(())
        } else {
            Err(self.fail(what))
        }
    }

    /// Only blanks are left.
    pub(crate) fn end(&mut self) -> Result<(), InstanceError> {
        match self.peek() {
            None => Ok(()),
            Some(_) => Err(self.fail("text after the object")),
        }
    }

    fn literal(&mut self, word: &'static [u8]) -> bool {
        self.ws();
        if self.text[self.at..].starts_with(word) {
            self.at += word.len();
            true
        } else {
            false
        }
    }

    /// `null` (consumed) or not (nothing consumed).
    pub(super) fn null(&mut self) -> bool {
        self.literal(b"null")
    }

    pub(super) fn boolean(&mut self) -> Result<bool, InstanceError> {
        if self.literal(b"true") {
            Ok(true)
        } else if self.literal(b"false") {
            Ok(false)
        } else {
            Err(self.fail("a boolean"))
        }
    }

    /// An integer in `i64` (no fraction, no exponent).
    pub(crate) fn integer(&mut self) -> Result<i64, InstanceError> {
        self.ws();
        let neg = self.text.get(self.at) == Some(&b'-');
        let start = self.at + usize::from(neg);
        let mut end = start;
        while self.text.get(end).is_some_and(u8::is_ascii_digit) {
            end += 1;
        }
        let digits = &self.text[start..end];
        if digits.is_empty() || (digits.len() > 1 && digits[0] == b'0') {
            return Err(self.fail("an integer"));
        }
        if matches!(self.text.get(end), Some(b'.' | b'e' | b'E')) {
            return Err(self.fail("an integer without fraction or exponent"));
        }
        let mut v: i64 = 0;
        for d in digits {
            let d = i64::from(d - b'0');
            v = v
                .checked_mul(10)
                .and_then(|v| {
                    if neg {
                        v.checked_sub(d)
                    } else {
                        v.checked_add(d)
                    }
                })
                .ok_or_else(|| self.fail("an integer in 64 bits"))?;
        }
        self.at = end;
        Ok(v)
    }

    fn hex4(&mut self) -> Result<u32, InstanceError> {
        let Some(h) = self.text.get(self.at..self.at + 4) else {
            return Err(self.fail("four hex digits"));
        };
        let mut v = 0u32;
        for c in h {
            let d = char::from(*c)
                .to_digit(16)
                .ok_or_else(|| self.fail("four hex digits"))?;
            v = v * 16 + d;
        }
        self.at += 4;
        Ok(v)
    }

    fn escape(&mut self, out: &mut String) -> Result<(), InstanceError> {
        let Some(&c) = self.text.get(self.at) else {
            return Err(self.fail("an escape"));
        };
        self.at += 1;
        let ch = match c {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => {
                let hi = self.hex4()?;
                let code = if (0xD800..0xDC00).contains(&hi) {
                    if !self.text[self.at..].starts_with(b"\\u") {
                        return Err(self.fail("a low surrogate"));
                    }
                    self.at += 2;
                    let lo = self.hex4()?;
                    if !(0xDC00..0xE000).contains(&lo) {
                        return Err(self.fail("a low surrogate"));
                    }
                    0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00)
                } else {
                    hi
                };
                char::from_u32(code).ok_or_else(|| self.fail("a unicode scalar value"))?
            }
            _ => return Err(self.fail("a known escape")),
        };
        out.push(ch);
        Ok(())
    }

    /// A string, unescaped.
    pub(crate) fn string(&mut self) -> Result<String, InstanceError> {
        self.expect(b'"', "a string")?;
        let mut out = String::new();
        loop {
            let run = self.at;
            while let Some(&c) = self.text.get(self.at) {
                if c == b'"' || c == b'\\' || c < 0x20 {
                    break;
                }
                self.at += 1;
            }
            let s = core::str::from_utf8(&self.text[run..self.at])
                .map_err(|_| self.fail("UTF-8 text"))?;
            out.push_str(s);
            match self.text.get(self.at) {
                Some(b'"') => {
                    self.at += 1;
                    return Ok(out);
                }
                Some(b'\\') => {
                    self.at += 1;
                    self.escape(&mut out)?;
                }
                _ => return Err(self.fail("a closed string")),
            }
        }
    }

    /// A string or `null`.
    pub(super) fn opt_string(&mut self) -> Result<Option<String>, InstanceError> {
        if self.null() {
            Ok(None)
        } else {
            self.string().map(Some)
        }
    }

    /// An integer in `i32` or `null`.
    pub(super) fn opt_i32(&mut self) -> Result<Option<i32>, InstanceError> {
        if self.null() {
            return Ok(None);
        }
        let start = self.at;
        let v = self.integer()?;
        i32::try_from(v)
            .map(Some)
            .map_err(|_| InstanceError::Syntax {
                at: start,
                what: "an integer in 32 bits",
            })
    }

    /// Any value, validated; its raw text (`depth`: the nesting it sits in).
    pub(crate) fn raw(&mut self, depth: usize) -> Result<&'a str, InstanceError> {
        self.ws();
        let start = self.at;
        self.skip(depth)?;
        core::str::from_utf8(&self.text[start..self.at]).map_err(|_| self.fail("UTF-8 text"))
    }

    fn skip(&mut self, depth: usize) -> Result<(), InstanceError> {
        if depth > MAX_DEPTH {
            return Err(self.fail("nesting within 32 levels"));
        }
        match self.peek() {
            Some(b'{') => {
                self.at += 1;
                self.members(|r, _| r.skip(depth + 1))
            }
            Some(b'[') => {
                self.at += 1;
                self.elements(|r| r.skip(depth + 1))
            }
            Some(b'"') => self.string().map(drop),
            Some(b't' | b'f') => self.boolean().map(drop),
            Some(b'n') if self.null() => Ok(()),
            Some(b'-' | b'0'..=b'9') => self.number(),
            _ => Err(self.fail("a value")),
        }
    }

    /// Any JSON number (for payloads).
    fn number(&mut self) -> Result<(), InstanceError> {
        let digits = |r: &mut Self| {
            let s = r.at;
            while r.text.get(r.at).is_some_and(u8::is_ascii_digit) {
                r.at += 1;
            }
            if r.at == s {
                Err(r.fail("digits"))
            } else {
                Ok(())
            }
        };
        if self.text.get(self.at) == Some(&b'-') {
            self.at += 1;
        }
        if self.text.get(self.at) == Some(&b'0') {
            self.at += 1;
        } else {
            digits(self)?;
        }
        if self.text.get(self.at) == Some(&b'.') {
            self.at += 1;
            digits(self)?;
        }
        if matches!(self.text.get(self.at), Some(b'e' | b'E')) {
            self.at += 1;
            if matches!(self.text.get(self.at), Some(b'+' | b'-')) {
                self.at += 1;
            }
            digits(self)?;
        }
        Ok(())
    }

    /// The members of an object whose `{` was consumed: `each(reader, key)` reads
    /// each value; ends after the `}`.
    pub(crate) fn members(
        &mut self,
        mut each: impl FnMut(&mut Self, String) -> Result<(), InstanceError>,
    ) -> Result<(), InstanceError> {
        self.sequence(b'}', "`,` or `}`", |r| {
            let key = r.string()?;
            r.expect(b':', "`:`")?;
            each(r, key)
        })
    }

    /// The elements of an array whose `[` was consumed; ends after the `]`.
    pub(super) fn elements(
        &mut self,
        each: impl FnMut(&mut Self) -> Result<(), InstanceError>,
    ) -> Result<(), InstanceError> {
        self.sequence(b']', "`,` or `]`", each)
    }

    /// Items separated by `,` up to `close` (consumed); none at all is allowed.
    fn sequence(
        &mut self,
        close: u8,
        what: &'static str,
        mut each: impl FnMut(&mut Self) -> Result<(), InstanceError>,
    ) -> Result<(), InstanceError> {
        if self.peek() == Some(close) {
            self.at += 1;
            return Ok(());
        }
        loop {
            each(self)?;
            match self.peek() {
                Some(b',') => self.at += 1,
                Some(c) if c == close => {
                    self.at += 1;
                    return Ok(());
                }
                _ => return Err(self.fail(what)),
            }
        }
    }
}

/// Writes `s` as a JSON string (quotes, `\"`, `\\` and control characters escaped).
pub(crate) fn write_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                out.push_str("\\u00");
                out.push(char::from(HEX[(c as usize) >> 4]));
                out.push(char::from(HEX[(c as usize) & 15]));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}
