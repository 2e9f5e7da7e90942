//! HTTP request bodies as the routes parse them (`cohost::http::parse_request_body`): the
//! first byte picks the route's body type, the rest is the body. Every input must give a
//! value or an `ApiError` with a code and a message, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((route, body)) = data.split_first() else {
        return;
    };
    if let Err(error) = cohost::http::parse_request_body(*route, body) {
        assert!(!error.code.is_empty() && !error.message.is_empty());
        assert!(error.status.is_client_error(), "{}", error.status);
    }
});
