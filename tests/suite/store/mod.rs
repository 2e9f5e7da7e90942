//! The event log: durability across kills and damage reported at start-up.

pub(crate) mod damage;
pub(crate) mod durability;
