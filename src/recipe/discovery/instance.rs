//! [`ServiceInstance`] and its node format: the JSON object Curator 5.4's
//! `JsonInstanceSerializer` writes and reads (see the [module docs](super)).

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

use super::error::InstanceError;
use super::json::{write_string, Reader};

/// How an instance lives (Curator's `ServiceType`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub enum ServiceType {
    /// Ephemeral: gone with its registrant's session (re-created by a registrant that
    /// carries on in a new session). The default.
    #[default]
    Dynamic,
    /// Persistent.
    Static,
    /// Persistent.
    Permanent,
    /// Curator's ephemeral-sequential variant: read, never registered by us (a
    /// registration of this type ends with `Failed(NotAllowed)`).
    DynamicSequential,
}

impl ServiceType {
    /// Its name in the JSON (`"DYNAMIC"`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            ServiceType::Dynamic => "DYNAMIC",
            ServiceType::Static => "STATIC",
            ServiceType::Permanent => "PERMANENT",
            ServiceType::DynamicSequential => "DYNAMIC_SEQUENTIAL",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        [
            ServiceType::Dynamic,
            ServiceType::Static,
            ServiceType::Permanent,
            ServiceType::DynamicSequential,
        ]
        .into_iter()
        .find(|t| t.as_str() == s)
    }
}

/// One part of a `uriSpec` (Curator's `UriSpec.Part`): literal text, or a variable
/// (`{name}`) filled in by [`ServiceInstance::uri`].
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct UriPart {
    /// The text, or the variable's name.
    pub value: String,
    /// Is it a variable?
    pub variable: bool,
}

/// A registered instance of a service (Curator's `ServiceInstance`).
///
/// `payload` is kept as raw JSON text: what we write is exactly the text given (it
/// must be one valid JSON value; [`to_json`](Self::to_json) refuses anything else),
/// and what we read is the value's text as found, `"@class"` member and all. A Java
/// reader with `JsonInstanceSerializer<Map>` accepts an object without `"@class"`; to
/// be read as a Java class, put `"@class":"<class name>"` in the object.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ServiceInstance {
    /// The service's name (the node's parent).
    pub name: String,
    /// The instance id, unique in the service (the node's name).
    pub id: String,
    /// Host name or address.
    pub address: Option<String>,
    /// Port.
    pub port: Option<i32>,
    /// TLS port.
    pub ssl_port: Option<i32>,
    /// Raw JSON text of the payload (`None`: `null`).
    pub payload: Option<String>,
    /// Registration time, milliseconds since the epoch, given by the registrant (the
    /// core has no clock).
    pub registration_time_utc: i64,
    /// Ephemeral or persistent.
    pub service_type: ServiceType,
    /// The `uriSpec` parts (`None`: `null`).
    pub uri_spec: Option<Vec<UriPart>>,
    /// Enabled? (Curator 5.4 reads this field but never writes it: an instance without
    /// it is enabled.)
    pub enabled: bool,
}

impl ServiceInstance {
    /// Instance `id` of service `name` at `address:port`, dynamic, enabled, no payload.
    pub fn new(name: &str, id: &str, address: &str, port: i32) -> Self {
        ServiceInstance {
            name: name.into(),
            id: id.into(),
            address: Some(address.into()),
            port: Some(port),
            ssl_port: None,
            payload: None,
            registration_time_utc: 0,
            service_type: ServiceType::Dynamic,
            uri_spec: None,
            enabled: true,
        }
    }

    /// Parses a Curator `UriSpec` template (`"{scheme}://{address}:{port}"`) into parts.
    pub fn parse_uri_spec(template: &str) -> Vec<UriPart> {
        let mut parts = Vec::new();
        let mut rest = template;
        while !rest.is_empty() {
            let (text, var) = match rest.find('{') {
                Some(open) => match rest[open..].find('}') {
                    Some(close) => (&rest[..open], Some(&rest[open + 1..open + close])),
                    None => (rest, None),
                },
                None => (rest, None),
            };
            if !text.is_empty() {
                parts.push(UriPart {
                    value: text.into(),
                    variable: false,
                });
            }
            let Some(v) = var else { break };
            parts.push(UriPart {
                value: v.into(),
                variable: true,
            });
            rest = &rest[text.len() + v.len() + 2..];
        }
        parts
    }

    /// The URI its `uriSpec` describes (Curator's `UriSpec.build`): variables `name`,
    /// `id`, `address`, `port`, `ssl-port` and `scheme` (`https` when an SSL port is
    /// set, else `http`) filled in, an unknown variable left empty. `None` without a
    /// `uriSpec`.
    pub fn uri(&self) -> Option<String> {
        let spec = self.uri_spec.as_ref()?;
        let num = |p: Option<i32>| p.map(|p| p.to_string()).unwrap_or_default();
        let mut out = String::new();
        for part in spec {
            if !part.variable {
                out.push_str(&part.value);
                continue;
            }
            let v = match part.value.as_str() {
                "name" => self.name.clone(),
                "id" => self.id.clone(),
                "address" => self.address.clone().unwrap_or_default(),
                "port" => num(self.port),
                "ssl-port" => num(self.ssl_port),
                "scheme" if self.ssl_port.is_some() => "https".into(),
                "scheme" => "http".into(),
                _ => String::new(),
            };
            out.push_str(&v);
        }
        Some(out)
    }

    /// Its JSON, fields in Curator's order (`name`, `id`, `address`, `port`, `sslPort`,
    /// `payload`, `registrationTimeUTC`, `serviceType`, `uriSpec`, `enabled`). Fails if
    /// `payload` is not one valid JSON value.
    pub fn to_json(&self) -> Result<String, InstanceError> {
        let payload = match &self.payload {
            Some(p) => {
                let mut r = Reader::new(p.as_bytes());
                let v = r.raw(1)?;
                r.end()?;
                v
            }
            None => "null",
        };
        let mut out = String::with_capacity(160 + payload.len());
        out.push_str("{\"name\":");
        write_string(&mut out, &self.name);
        out.push_str(",\"id\":");
        write_string(&mut out, &self.id);
        out.push_str(",\"address\":");
        match &self.address {
            Some(a) => write_string(&mut out, a),
            None => out.push_str("null"),
        }
        let num = |p: Option<i32>| p.map_or_else(|| "null".into(), |p| p.to_string());
        out.push_str(&format!(
            ",\"port\":{},\"sslPort\":{},\"payload\":{payload},\"registrationTimeUTC\":{},\"serviceType\":\"{}\",\"uriSpec\":",
            num(self.port),
            num(self.ssl_port),
            self.registration_time_utc,
            self.service_type.as_str()
        ));
        match &self.uri_spec {
            None => out.push_str("null"),
            Some(parts) => {
                out.push_str("{\"parts\":[");
                for (i, p) in parts.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str("{\"value\":");
                    write_string(&mut out, &p.value);
                    out.push_str(if p.variable {
                        ",\"variable\":true}"
                    } else {
                        ",\"variable\":false}"
                    });
                }
                out.push_str("]}");
            }
        }
        out.push_str(if self.enabled {
            ",\"enabled\":true}"
        } else {
            ",\"enabled\":false}"
        });
        Ok(out)
    }

    /// Reads an instance from its node data: any field order, unknown fields ignored,
    /// missing optional fields as Curator defaults them (`enabled` true, `serviceType`
    /// DYNAMIC). `name` and `id` are required.
    pub fn from_json(data: &[u8]) -> Result<Self, InstanceError> {
        let mut r = Reader::new(data);
        let mut i = ServiceInstance::new("", "", "", 0);
        i.address = None;
        i.port = None;
        let (mut name, mut id) = (false, false);
        r.expect(b'{', "`{`")?;
        r.members(|r, key| {
            match key.as_str() {
                "name" => {
                    i.name = r.string()?;
                    name = true;
                }
                "id" => {
                    i.id = r.string()?;
                    id = true;
                }
                "address" => i.address = r.opt_string()?,
                "port" => i.port = r.opt_i32()?,
                "sslPort" => i.ssl_port = r.opt_i32()?,
                "payload" => {
                    let raw = r.raw(1)?;
                    i.payload = (raw != "null").then(|| raw.into());
                }
                "registrationTimeUTC" => i.registration_time_utc = r.integer()?,
                "serviceType" => {
                    let t = r.string()?;
                    i.service_type =
                        ServiceType::parse(&t).ok_or(InstanceError::Field("serviceType"))?;
                }
                "uriSpec" => i.uri_spec = read_uri_spec(r)?,
                "enabled" => i.enabled = r.boolean()?,
                _ => {
                    r.raw(1)?;
                }
            }
            Ok(())
        })?;
        r.end()?;
        if !name {
            return Err(InstanceError::Missing("name"));
        }
        if !id {
            return Err(InstanceError::Missing("id"));
        }
        Ok(i)
    }
}

fn read_uri_spec(r: &mut Reader<'_>) -> Result<Option<Vec<UriPart>>, InstanceError> {
    if r.null() {
        return Ok(None);
    }
    let mut parts = Vec::new();
    r.expect(b'{', "a uriSpec object")?;
    r.members(|r, key| {
        if key != "parts" {
            return r.raw(2).map(drop);
        }
        r.expect(b'[', "the parts array")?;
        r.elements(|r| {
            let mut part = UriPart {
                value: String::new(),
                variable: false,
            };
            r.expect(b'{', "a part object")?;
            r.members(|r, key| match key.as_str() {
                "value" => r.string().map(|v| part.value = v),
                "variable" => r.boolean().map(|v| part.variable = v),
                _ => r.raw(4).map(drop),
            })?;
            parts.push(part);
            Ok(())
        })
    })?;
    Ok(Some(parts))
}
