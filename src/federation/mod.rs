//! Federation: many machines in one view through NATS JetStream (`serve --nats URL`).
//!
//! This module is a reader of the event log and a client of the service layer, never a second
//! writer: the publisher ([`publisher`]) reads the store after its cursor like any SSE reader
//! and mirrors every stored event into the machine's JetStream stream; what it shows of itself
//! (link, backlog, last error) goes through the service's [`crate::service::FederationStatus`].
//! The core and the service do not import it (the tidy test holds them to that).
//!
//! - [`names`]: the machine name, the stream, the subjects, the de-duplication ids, the KV bucket;
//! - [`connect`]: the NATS settings, refused when a remote server lacks TLS or credentials;
//! - [`checkpoint`]: the home's identity and the last acknowledged seq, durable in the home;
//! - [`publisher`]: the publishing loop;
//! - [`hub`]: a hub's consumer of every other machine's stream and view (`serve --hub`), which
//!   fills the service's `HubWorld` and never this machine's log;
//! - [`mirror`]: the hub's durable copy of what it consumed (resumes its durable consumer);
//! - [`commands`]: a machine's side of a hub's commands (`serve --nats-commands`), executed as a
//!   client of its own service layer.

pub mod checkpoint;
pub mod commands;
pub mod connect;
pub mod hub;
pub mod mirror;
pub mod names;
pub mod publisher;

pub use commands::Commands;
pub use connect::NatsConfig;
pub use hub::Hub;
pub use publisher::Publisher;
