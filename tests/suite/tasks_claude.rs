//! Tasks and leases on claude sessions: a draft in the box takes control; restarts.
