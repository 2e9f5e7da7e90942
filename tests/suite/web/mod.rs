//! The web page: its HTML, the browser harness, and the cockpit driven in a real browser.

pub(crate) mod browser;
pub(crate) mod cockpit;
pub(crate) mod cockpit_adopt;
pub(crate) mod cockpit_lists;
pub(crate) mod cockpit_profiles;
pub(crate) mod cockpit_rehome;
pub(crate) mod cockpit_rehome_claude;
pub(crate) mod hub_page;
pub(crate) mod layout;
pub(crate) mod page;
