//! TLS on the I/O thread's non-blocking socket: a `rustls::ClientConnection` pumped by
//! hand (no tokio), so the poll loop stays the only place that waits. Every call
//! returns `WouldBlock` as the socket does; errors from `rustls` come back as
//! `io::Error`s wrapping the `rustls::Error`, which `transport_error` reads.

use std::io::{self, Read, Write};

use mio::net::TcpStream;
use rustls::ClientConnection;
use zk_recipes::session::TransportError;

use zk_recipes_surface::Tls;

/// One TLS connection over the session's socket.
pub(crate) struct TlsIo {
    conn: ClientConnection,
}

fn rustls_error(e: rustls::Error) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e)
}

impl TlsIo {
    /// A client connection to `host` (`host:port` of the connect string).
    pub(crate) fn new(tls: &Tls, host: &str) -> Result<TlsIo, TransportError> {
        let name = tls.name_for(host)?;
        let conn = ClientConnection::new(tls.config().clone(), name)
            .map_err(|e| TransportError::Tls(zk_recipes_surface::tls::failure(&e)))?;
        Ok(TlsIo { conn })
    }

    /// Writes what TLS has to send, as far as the socket takes it now.
    pub(crate) fn flush(&mut self, stream: &mut TcpStream) -> io::Result<()> {
        while self.conn.wants_write() {
            match self.conn.write_tls(stream) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Reads TLS records from the socket and processes them; `Ok(0)` at end of stream.
    fn read_records(&mut self, stream: &mut TcpStream) -> io::Result<usize> {
        let n = self.conn.read_tls(stream)?;
        if n > 0 {
            if let Err(e) = self.conn.process_new_packets() {
                // Tell the server why (rustls queued an alert), then fail.
                let _ = self.flush(stream);
                return Err(rustls_error(e));
            }
        }
        Ok(n)
    }

    /// Drives the handshake as far as the socket allows: `Ok(true)` once it is done.
    pub(crate) fn handshake(&mut self, stream: &mut TcpStream) -> io::Result<bool> {
        loop {
            self.flush(stream)?;
            if !self.conn.is_handshaking() {
                return Ok(true);
            }
            match self.read_records(stream) {
                Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Reads plaintext: what is decrypted already, else what the socket has now
    /// (`WouldBlock` when nothing; `Ok(0)` at end of stream).
    pub(crate) fn read(&mut self, stream: &mut TcpStream, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            match self.conn.reader().read(buf) {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
            if self.read_records(stream)? == 0 {
                return Ok(0);
            }
            // Whatever TLS answers by itself (a key update, say).
            self.flush(stream)?;
        }
    }

    /// Takes plaintext to send (`WouldBlock` while TLS holds as much as it buffers)
    /// and writes what the socket takes now; the rest waits for [`TlsIo::flush`].
    pub(crate) fn write(&mut self, stream: &mut TcpStream, data: &[u8]) -> io::Result<usize> {
        let n = self.conn.writer().write(data)?;
        self.flush(stream)?;
        if n == 0 && !data.is_empty() {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        Ok(n)
    }
}
