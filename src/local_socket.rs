//! The daemon's Unix socket, `$COHOST_HOME/cohost.sock`, as its local clients reach it: the
//! CLI (and the tmux hooks' `cohost focus`), `cohost mcp` and the permission hook (this file is
//! compiled into `cohost-hook` too, by `#[path]`).
//!
//! Why a socket and not the TCP port: the token must go only to this home's daemon. Any local
//! process can bind the daemon's port while the daemon is down (a crash, a reboot, the
//! service's restart wait) and collect the token a client sends there. The socket lives in the
//! home, which the daemon keeps at mode 0700, so only this user (or root) can have created
//! it; and before a request leaves, the client asks the kernel who holds the other end
//! (`SO_PEERCRED`) and refuses any uid but its own and root's. A client never falls back to
//! the port. The port stays for browsers and remote-style clients.
//!
//! The transport is a [`ureq`] connector over the socket (ureq's `unversioned` transport API,
//! pinned by the lock file): the requests are ordinary HTTP/1.1 to `http://localhost`, which
//! the daemon's guard treats like any loopback request (the token is still required).

use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

use ureq::unversioned::resolver::{ResolvedSocketAddrs, Resolver};
use ureq::unversioned::transport::{
    Buffers, ConnectionDetails, Connector, LazyBuffers, NextTimeout, Transport,
};

/// The socket's file name in the home.
pub const SOCKET_FILE: &str = "cohost.sock";

/// The origin clients put in their request URLs; the socket decides where requests go.
pub const SOCKET_ORIGIN: &str = "http://localhost";

/// An agent whose every connection is a connection to `socket`, checked to be served by this
/// user (or root), never through a proxy.
pub fn agent(
    socket: PathBuf,
    config: ureq::config::ConfigBuilder<ureq::typestate::AgentScope>,
) -> ureq::Agent {
    let config = config.proxy(None).build();
    ureq::Agent::with_parts(config, SocketConnector { path: socket }, SocketResolver)
}

/// Whether `error` means no daemon holds the socket (none there, or a stale file).
pub fn is_not_running(error: &ureq::Error) -> bool {
    matches!(error, ureq::Error::Io(io) if matches!(
        io.kind(),
        io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused
    ))
}

/// Connects to `path` and checks who serves it.
fn connect(path: &Path) -> io::Result<UnixStream> {
    let stream = UnixStream::connect(path)?;
    let ours = current_uid();
    let theirs = peer_uid(&stream)?;
    if !trusted(theirs, ours) {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "{} is served by uid {theirs}, not by you (uid {ours}) or root: the token was not sent",
                path.display()
            ),
        ));
    }
    Ok(stream)
}

/// A socket served by this user or root may have the token: no one else.
fn trusted(server_uid: u32, our_uid: u32) -> bool {
    server_uid == our_uid || server_uid == 0
}

/// This process's effective uid. The same call as `core::private_file::current_uid`, written
/// again here because `cohost-hook` compiles this file alone (by `#[path]`), without the library.
fn current_uid() -> u32 {
    #[allow(unsafe_code)]
    // SAFETY: geteuid(2) takes no arguments, touches no memory and cannot fail.
    unsafe {
        libc::geteuid()
    }
}

/// The uid of the process on the other end of `stream`, as the kernel recorded it when that
/// process bound the socket.
fn peer_uid(stream: &UnixStream) -> io::Result<u32> {
    use std::os::fd::AsRawFd as _;
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    #[allow(unsafe_code)]
    // SAFETY: the descriptor is open for the call (borrowed from `stream`); `cred` and `len`
    // are valid for writes and `len` holds `cred`'s size, which bounds what the kernel writes.
    let result = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&raw mut cred).cast(),
            &raw mut len,
        )
    };
    if result != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(cred.uid)
}

#[derive(Debug)]
struct SocketConnector {
    path: PathBuf,
}

impl<In: Transport> Connector<In> for SocketConnector {
    type Out = SocketTransport;

    fn connect(
        &self,
        details: &ConnectionDetails,
        _chained: Option<In>,
    ) -> Result<Option<SocketTransport>, ureq::Error> {
        let stream = connect(&self.path)?;
        let buffers = LazyBuffers::new(
            details.config.input_buffer_size(),
            details.config.output_buffer_size(),
        );
        Ok(Some(SocketTransport { stream, buffers }))
    }
}

/// Every name resolves to one placeholder address: the connector ignores it.
#[derive(Debug)]
struct SocketResolver;

impl Resolver for SocketResolver {
    fn resolve(
        &self,
        _uri: &ureq::http::Uri,
        _config: &ureq::config::Config,
        _timeout: NextTimeout,
    ) -> Result<ResolvedSocketAddrs, ureq::Error> {
        let mut addrs = self.empty();
        addrs.push(SocketAddr::from(([127, 0, 0, 1], 0)));
        Ok(addrs)
    }
}

#[derive(Debug)]
struct SocketTransport {
    stream: UnixStream,
    buffers: LazyBuffers,
}

/// A timed-out read or write is ureq's timeout error (with its reason), anything else as is.
fn timed(error: io::Error, timeout: NextTimeout) -> ureq::Error {
    match error.kind() {
        io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock => ureq::Error::Timeout(timeout.reason),
        _ => ureq::Error::Io(error),
    }
}

impl Transport for SocketTransport {
    fn buffers(&mut self) -> &mut dyn Buffers {
        &mut self.buffers
    }

    fn transmit_output(&mut self, amount: usize, timeout: NextTimeout) -> Result<(), ureq::Error> {
        let timeout = timeout.for_write();
        self.stream
            .set_write_timeout(timeout.not_zero().map(|after| *after))?;
        let output = &self.buffers.output()[..amount];
        (&self.stream)
            .write_all(output)
            .map_err(|error| timed(error, timeout))
    }

    fn await_input(&mut self, timeout: NextTimeout) -> Result<bool, ureq::Error> {
        let timeout = timeout.for_read();
        self.stream
            .set_read_timeout(timeout.not_zero().map(|after| *after))?;
        let input = self.buffers.input_append_buf();
        let read = loop {
            match (&self.stream).read(input) {
                Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
                other => break other,
            }
        };
        let amount = read.map_err(|error| timed(error, timeout))?;
        self.buffers.input_appended(amount);
        Ok(amount > 0)
    }

    fn is_open(&mut self) -> bool {
        // A pooled connection is reusable when nothing is waiting on it and it is not closed:
        // a read that would block says exactly that.
        if self.stream.set_nonblocking(true).is_err() {
            return false;
        }
        let mut byte = [0u8; 1];
        let open = matches!(
            (&self.stream).read(&mut byte),
            Err(error) if error.kind() == io::ErrorKind::WouldBlock
        );
        open && self.stream.set_nonblocking(false).is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_this_user_or_root_is_trusted_with_the_token() {
        assert!(trusted(1000, 1000));
        assert!(trusted(0, 1000));
        assert!(trusted(0, 0));
        assert!(!trusted(1001, 1000));
        assert!(!trusted(65534, 0));
    }

    #[test]
    fn a_socket_this_process_serves_passes_the_check() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join(SOCKET_FILE);
        let _listener =
            std::os::unix::net::UnixListener::bind(&path).unwrap_or_else(|e| panic!("bind: {e}"));
        let stream = connect(&path).unwrap_or_else(|e| panic!("connect: {e}"));
        assert_eq!(
            peer_uid(&stream).unwrap_or_else(|e| panic!("{e}")),
            current_uid()
        );
    }
}
