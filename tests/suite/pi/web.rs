//! The web page's New session form starts a Pi session in the real browser: the runtime
//! offered, its approval policies, its models suggested, and the first prompt's turn shown in
//! the transcript.

use super::PiFixture;
use crate::support::hosted_cases;

#[test]
fn the_new_session_form_starts_a_pi_session() {
    hosted_cases::the_new_session_form_starts_a_session(&PiFixture::start());
}
