//! SASL authentication: the [`Mechanism`] trait the session drives on every
//! connection, and [`DigestMd5`], the one mechanism this crate implements (RFC 2831
//! `DIGEST-MD5` with `qop=auth`, as ZooKeeper's server speaks it with its
//! `DigestLoginModule`).
//!
//! The session runs the exchange right after the server accepts the handshake and
//! before anything else goes out on the connection (auth replay, watches re-armed,
//! queued requests): it sends the mechanism's [initial
//! response](Exchange::initial_response) (empty for DIGEST-MD5), hands every token the
//! server answers to [`Exchange::evaluate_challenge`] and sends what it returns, until
//! the exchange is [complete](Exchange::is_complete). A failure ends the session with
//! [`Error::AuthFailed`](crate::error::Error::AuthFailed) naming the mechanism and the
//! reason ([`AuthFailure::Sasl`]); it is final, never retried.
//!
//! The core has no random number generator: the driver hands the session random bytes
//! before each connection ([`Session::handle_random`](crate::session::Session::handle_random)),
//! and the session passes them to [`Mechanism::start`] (DIGEST-MD5's client nonce).
//!
//! Another mechanism (a Kerberos one from the user's own stack, say) implements
//! [`Mechanism`] and [`Exchange`]; nothing else changes.

use alloc::boxed::Box;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

use md5::{Digest, Md5};

pub use crate::error::{AuthFailure, SaslFailure};

/// A SASL mechanism: one [`Exchange`] per connection.
pub trait Mechanism: fmt::Debug + Send + Sync {
    /// The mechanism's registered name (`"DIGEST-MD5"`, `"GSSAPI"`, ...), named in
    /// errors.
    fn name(&self) -> &'static str;

    /// Starts the exchange for a new connection. `random` comes from the driver's
    /// entropy source, fresh for each connection.
    fn start(&self, random: [u8; 32]) -> Box<dyn Exchange>;
}

/// One SASL exchange on one connection (the client side of `javax.security.sasl.SaslClient`).
pub trait Exchange: fmt::Debug + Send {
    /// The first token to send (empty if the mechanism waits for the server's challenge,
    /// as DIGEST-MD5 does).
    fn initial_response(&mut self) -> Result<Vec<u8>, SaslFailure>;

    /// The server's token: `Some(token)` to send back, `None` when there is nothing to
    /// send. An error ends the session.
    fn evaluate_challenge(&mut self, challenge: &[u8]) -> Result<Option<Vec<u8>>, SaslFailure>;

    /// Has the exchange succeeded (the server authenticated us and, where the mechanism
    /// can, proved who it is)?
    fn is_complete(&self) -> bool;
}

/// ZooKeeper's SASL service name and server name: the digest URI is
/// `zookeeper/zk-sasl-md5` (the Java server creates its DIGEST-MD5 server with these).
pub const DIGEST_URI: &str = "zookeeper/zk-sasl-md5";

/// DIGEST-MD5 (RFC 2831) with `qop=auth`, as the Java client (`ZooKeeperSaslClient`)
/// speaks it to a server whose JAAS `Server` section uses `DigestLoginModule`
/// (`user_<name>="<password>"`). The server's final `rspauth` is checked: a server
/// that cannot prove it knows the password is refused.
///
/// ```
/// use zk_recipes::sasl::{DigestMd5, Mechanism};
/// let m = DigestMd5::new("bob", "secret");
/// assert_eq!(m.name(), "DIGEST-MD5");
/// // Debug never shows the password.
/// assert!(!format!("{m:?}").contains("secret"));
/// ```
#[derive(Clone)]
pub struct DigestMd5 {
    user: String,
    password: String,
}

impl DigestMd5 {
    /// The mechanism for `user` with `password`.
    pub fn new(user: &str, password: &str) -> DigestMd5 {
        DigestMd5 {
            user: user.into(),
            password: password.into(),
        }
    }

    /// The user name (the server's authorization id: ACLs name it as `sasl:<user>`).
    pub fn user(&self) -> &str {
        &self.user
    }
}

impl fmt::Debug for DigestMd5 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DigestMd5")
            .field("user", &self.user)
            .finish_non_exhaustive()
    }
}

impl Mechanism for DigestMd5 {
    fn name(&self) -> &'static str {
        "DIGEST-MD5"
    }

    fn start(&self, random: [u8; 32]) -> Box<dyn Exchange> {
        Box::new(DigestExchange {
            user: self.user.clone(),
            password: self.password.clone(),
            cnonce: hex(&random[..16]),
            step: DigestStep::Start,
        })
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum DigestStep {
    /// Nothing sent yet.
    Start,
    /// The empty initial token went out; the challenge is next.
    AwaitChallenge,
    /// Our response went out; the server's `rspauth` is next, and must equal this.
    AwaitRspauth(String),
    /// The server proved it knows the password.
    Done,
}

struct DigestExchange {
    user: String,
    password: String,
    cnonce: String,
    step: DigestStep,
}

impl fmt::Debug for DigestExchange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DigestExchange")
            .field("user", &self.user)
            .field("step", &self.step)
            .finish_non_exhaustive()
    }
}

impl Exchange for DigestExchange {
    fn initial_response(&mut self) -> Result<Vec<u8>, SaslFailure> {
        self.step = DigestStep::AwaitChallenge;
        Ok(Vec::new())
    }

    fn evaluate_challenge(&mut self, challenge: &[u8]) -> Result<Option<Vec<u8>>, SaslFailure> {
        match core::mem::replace(&mut self.step, DigestStep::Done) {
            DigestStep::Start | DigestStep::AwaitChallenge => {
                let (response, rspauth) = self.respond(challenge)?;
                self.step = DigestStep::AwaitRspauth(rspauth);
                Ok(Some(response))
            }
            DigestStep::AwaitRspauth(expected) => {
                let fields = Fields::parse(challenge)?;
                match fields.get("rspauth") {
                    Some(got) if got == expected.as_bytes() => Ok(None),
                    Some(_) => Err(SaslFailure::ServerNotVerified),
                    None => Err(SaslFailure::BadChallenge(
                        "no rspauth in the server's answer",
                    )),
                }
            }
            DigestStep::Done => Err(SaslFailure::BadChallenge(
                "a token after the exchange completed",
            )),
        }
    }

    fn is_complete(&self) -> bool {
        self.step == DigestStep::Done
    }
}

impl DigestExchange {
    /// Our answer to the server's challenge, and the `rspauth` the server must send.
    fn respond(&self, challenge: &[u8]) -> Result<(Vec<u8>, String), SaslFailure> {
        let fields = Fields::parse(challenge)?;
        let nonce = fields
            .get("nonce")
            .ok_or(SaslFailure::BadChallenge("no nonce in the challenge"))?;
        if let Some(qop) = fields.get("qop") {
            if !qop
                .split(|&b| b == b',')
                .any(|q| q.trim_ascii().eq_ignore_ascii_case(b"auth"))
            {
                return Err(SaslFailure::BadChallenge(
                    "the server does not offer qop=auth",
                ));
            }
        }
        if let Some(algorithm) = fields.get("algorithm") {
            if !algorithm.eq_ignore_ascii_case(b"md5-sess") {
                return Err(SaslFailure::BadChallenge("algorithm is not md5-sess"));
            }
        }
        let utf8 = fields
            .get("charset")
            .is_some_and(|c| c.eq_ignore_ascii_case(b"utf-8"));
        let latin = latin1(&self.user).is_some() && latin1(&self.password).is_some();
        if !utf8 && !latin {
            return Err(SaslFailure::BadChallenge(
                "user or password outside ISO 8859-1 and the server offers no charset=utf-8",
            ));
        }
        let realm: &[u8] = fields.get("realm").unwrap_or(b"");
        let nc = "00000001";
        // One digest, with A2 prefixed `AUTHENTICATE:` for our response, `:` for `rspauth`.
        let digest_of = |method: &str| {
            digest(
                &self.user,
                realm,
                &self.password,
                nonce,
                nc,
                &self.cnonce,
                method,
            )
        };
        let response = digest_of("AUTHENTICATE:");
        let rspauth = digest_of(":");
        let mut out = Vec::new();
        if utf8 {
            out.extend_from_slice(b"charset=utf-8,");
        }
        out.extend_from_slice(b"username=\"");
        quote_into(&mut out, self.user.as_bytes());
        out.extend_from_slice(b"\",");
        if fields.get("realm").is_some() {
            out.extend_from_slice(b"realm=\"");
            quote_into(&mut out, realm);
            out.extend_from_slice(b"\",");
        }
        out.extend_from_slice(b"nonce=\"");
        quote_into(&mut out, nonce);
        out.extend_from_slice(b"\",nc=");
        out.extend_from_slice(nc.as_bytes());
        out.extend_from_slice(b",cnonce=\"");
        out.extend_from_slice(self.cnonce.as_bytes());
        out.extend_from_slice(b"\",digest-uri=\"");
        out.extend_from_slice(DIGEST_URI.as_bytes());
        out.extend_from_slice(b"\",maxbuf=65536,response=");
        out.extend_from_slice(response.as_bytes());
        out.extend_from_slice(b",qop=auth");
        Ok((out, rspauth))
    }
}

/// RFC 2831 §2.1.2.1 `response-value` (`a2_prefix` `"AUTHENTICATE:"`) or §2.1.3
/// `rspauth` (`":"`), algorithm md5-sess, qop auth, no authzid.
fn digest(
    user: &str,
    realm: &[u8],
    password: &str,
    nonce: &[u8],
    nc: &str,
    cnonce: &str,
    a2_prefix: &str,
) -> String {
    let mut h = Md5::new();
    h.update(text_bytes(user));
    h.update(b":");
    h.update(realm);
    h.update(b":");
    h.update(text_bytes(password));
    let secret = h.finalize();
    let mut a1 = Md5::new();
    a1.update(secret);
    a1.update(b":");
    a1.update(nonce);
    a1.update(b":");
    a1.update(cnonce.as_bytes());
    let ha1 = hex(&a1.finalize());
    let mut a2 = Md5::new();
    a2.update(a2_prefix.as_bytes());
    a2.update(DIGEST_URI.as_bytes());
    let ha2 = hex(&a2.finalize());
    let mut kd = Md5::new();
    for part in [
        ha1.as_bytes(),
        b":",
        nonce,
        b":",
        nc.as_bytes(),
        b":",
        cnonce.as_bytes(),
        b":auth:",
        ha2.as_bytes(),
    ] {
        kd.update(part);
    }
    hex(&kd.finalize())
}

/// A string as hashed: ISO 8859-1 when every character fits (RFC 2831 §2.1.2.1, as
/// Java does), UTF-8 otherwise.
fn text_bytes(s: &str) -> Vec<u8> {
    latin1(s).unwrap_or_else(|| s.as_bytes().to_vec())
}

fn latin1(s: &str) -> Option<Vec<u8>> {
    s.chars().map(|c| u8::try_from(u32::from(c)).ok()).collect()
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[usize::from(b >> 4)] as char);
        s.push(DIGITS[usize::from(b & 15)] as char);
    }
    s
}

/// Appends `value` as the inside of a quoted-string (`"` and `\` escaped).
fn quote_into(out: &mut Vec<u8>, value: &[u8]) {
    for &b in value {
        if b == b'"' || b == b'\\' {
            out.push(b'\\');
        }
        out.push(b);
    }
}

/// The `name=value` pairs of a challenge (values unquoted); the first of repeated
/// names (several `realm`s) wins.
struct Fields(Vec<(Vec<u8>, Vec<u8>)>);

impl Fields {
    fn parse(mut input: &[u8]) -> Result<Fields, SaslFailure> {
        const BAD: SaslFailure = SaslFailure::BadChallenge("malformed challenge");
        let mut fields = Vec::new();
        loop {
            input = input.trim_ascii_start();
            while let [b',', rest @ ..] = input {
                input = rest.trim_ascii_start();
            }
            if input.is_empty() {
                return Ok(Fields(fields));
            }
            let eq = input.iter().position(|&b| b == b'=').ok_or(BAD)?;
            let name = input[..eq].trim_ascii().to_ascii_lowercase();
            input = input[eq + 1..].trim_ascii_start();
            let mut value = Vec::new();
            if let [b'"', rest @ ..] = input {
                input = rest;
                loop {
                    match input {
                        [b'"', rest @ ..] => {
                            input = rest;
                            break;
                        }
                        [b'\\', c, rest @ ..] | [c, rest @ ..] => {
                            value.push(*c);
                            input = rest;
                        }
                        [] => return Err(BAD),
                    }
                }
            } else {
                let end = input.iter().position(|&b| b == b',').unwrap_or(input.len());
                value.extend_from_slice(input[..end].trim_ascii());
                input = &input[end..];
            }
            input = input.trim_ascii_start();
            if !matches!(input, [] | [b',', ..]) {
                return Err(BAD);
            }
            fields.push((name, value));
        }
    }

    fn get(&self, name: &str) -> Option<&[u8]> {
        self.0
            .iter()
            .find(|(n, _)| n == name.as_bytes())
            .map(|(_, v)| v.as_slice())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 2831 §4's example, with its digest URI swapped for ZooKeeper's: checks the
    /// hash chain against an independent computation (Python's hashlib, below).
    #[test]
    fn rfc2831_response_and_rspauth() {
        // python3 -c 'import hashlib as h;m=lambda b:h.md5(b);
        //  s=m(b"chris:elwood.innosoft.com:secret").digest();
        //  a1=m(s+b":OA6MG9tEQGm2hh:OA6MHXh6VqTrRk").hexdigest();
        //  f=lambda p:m((a1+":OA6MG9tEQGm2hh:00000001:OA6MHXh6VqTrRk:auth:"+m((p+"zookeeper/zk-sasl-md5").encode()).hexdigest()).encode()).hexdigest();
        //  print(f("AUTHENTICATE:"),f(":"))'
        let digest_of = |method: &str| {
            let realm = b"elwood.innosoft.com";
            digest(
                "chris",
                realm,
                "secret",
                b"OA6MG9tEQGm2hh",
                "00000001",
                "OA6MHXh6VqTrRk",
                method,
            )
        };
        let r = digest_of("AUTHENTICATE:");
        let a = digest_of(":");
        assert_eq!(r, "3d53f3e841d45c8a4dcf0f37c4725582");
        assert_eq!(a, "8c55a82deadfa98cf2a60488be40c74d");
        assert_ne!(r, a);
    }

    fn exchange() -> Box<dyn Exchange> {
        DigestMd5::new("chris", "secret").start([7; 32])
    }

    #[test]
    fn a_whole_exchange_verifies_the_server() {
        let mut x = exchange();
        assert_eq!(x.initial_response().unwrap(), b"");
        let challenge =
            br#"realm="zk-sasl-md5",nonce="abc\"d",qop="auth",charset=utf-8,algorithm=md5-sess"#;
        let response = x.evaluate_challenge(challenge).unwrap().unwrap();
        let text = core::str::from_utf8(&response).unwrap();
        assert!(text.starts_with("charset=utf-8,username=\"chris\",realm=\"zk-sasl-md5\",nonce=\"abc\\\"d\",nc=00000001,cnonce=\"07070707070707070707070707070707\",digest-uri=\"zookeeper/zk-sasl-md5\""), "{text}");
        assert!(!x.is_complete());
        let cnonce = "07070707070707070707070707070707";
        let good = digest(
            "chris",
            b"zk-sasl-md5",
            "secret",
            b"abc\"d",
            "00000001",
            cnonce,
            ":",
        );
        let mut wrong = exchange();
        wrong.initial_response().unwrap();
        wrong.evaluate_challenge(challenge).unwrap();
        assert_eq!(
            wrong.evaluate_challenge(b"rspauth=00000000000000000000000000000000"),
            Err(SaslFailure::ServerNotVerified)
        );
        assert_eq!(
            x.evaluate_challenge(alloc::format!("rspauth={good}").as_bytes()),
            Ok(None)
        );
        assert!(x.is_complete());
        assert!(x.evaluate_challenge(b"rspauth=x").is_err());
    }

    #[test]
    fn challenges_it_cannot_answer_are_refused() {
        for bad in [
            &b"realm=\"x\",qop=\"auth-conf\",nonce=\"n\""[..],
            b"realm=\"x\"",
            b"nonce=\"unterminated",
            b"nonce=\"n\"junk",
            b"nonce=\"n\",algorithm=md5",
            b"no equals sign",
        ] {
            let mut x = exchange();
            x.initial_response().unwrap();
            assert!(
                matches!(x.evaluate_challenge(bad), Err(SaslFailure::BadChallenge(_))),
                "{:?}",
                core::str::from_utf8(bad)
            );
        }
    }
}
