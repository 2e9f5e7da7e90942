//! The cockpit's layout and keyboard as people meet them: what asks them stays in view, Escape
//! closes what it opened, a skip link reaches the prompt, and text is readable in both colour
//! schemes (contrast measured in the page).

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::cockpit::{DESKTOP, PHONE, PLANTED, TURN, focused, open};
use crate::support::browser::{Browser, Key, UI_TIMEOUT};
use crate::support::codex_host::CodexFixture;
use crate::support::mock_responses::Step;

/// Where `el` is not wholly visible as the page stands (nothing scrolled for the test): outside
/// the viewport, cut by a scrolling ancestor, or covered at a corner. `null` when it is whole.
const CUT_JS: &str = "
  const el = arguments[0];
  const r = el.getBoundingClientRect();
  if (r.width === 0 || r.height === 0) return 'it has no box';
  if (r.top < 0 || r.left < 0 || r.bottom > innerHeight || r.right > innerWidth)
    return 'outside the ' + innerWidth + 'x' + innerHeight + ' viewport: ' + JSON.stringify(r);
  for (let p = el.parentElement; p; p = p.parentElement) {
    const style = getComputedStyle(p);
    if (!/(auto|scroll|hidden)/.test(style.overflowY + style.overflowX)) continue;
    const box = p.getBoundingClientRect();
    const top = box.top + p.clientTop, bottom = top + p.clientHeight;
    if (r.top < top - 0.5 || r.bottom > bottom + 0.5)
      return 'cut by #' + (p.id || p.className) + ' (' + Math.round(top) + '..' + Math.round(bottom) +
        ') at ' + Math.round(r.top) + '..' + Math.round(r.bottom);
  }
  for (const [x, y] of [[r.left + 2, r.top + 2], [r.right - 2, r.top + 2], [r.left + 2, r.bottom - 2], [r.right - 2, r.bottom - 2]]) {
    const hit = document.elementFromPoint(x, y);
    if (!hit || !(hit === el || el.contains(hit)))
      return 'covered at (' + Math.round(x) + ', ' + Math.round(y) + ') by ' + (hit ? hit.tagName + '#' + hit.id + '.' + hit.className : 'nothing');
  }
  return null;";

/// The element `css` whose text contains `needle` (the last one), as a WebDriver element
/// reference for scripts.
fn element(b: &Browser, css: &str, needle: &str) -> Value {
    let found = b.exec(
        "const all = Array.from(document.querySelectorAll(arguments[0])).filter(e => e.textContent.includes(arguments[1]));
         return all.length ? all[all.length - 1] : null;",
        vec![json!(css), json!(needle)],
    );
    if found.is_null() {
        b.fail(&format!("no `{css}` with {needle:?}"));
    }
    found
}

/// Waits until the element `css` with `needle` is wholly in view as the page leaves it (the
/// test scrolls nothing); fails with where it was cut.
#[track_caller]
fn wait_in_view(b: &Browser, what: &str, css: &str, needle: &str) {
    let deadline = Instant::now() + UI_TIMEOUT;
    loop {
        let cut = b.exec(CUT_JS, vec![element(b, css, needle)]);
        if cut.is_null() {
            return;
        }
        if Instant::now() >= deadline {
            b.fail(&format!(
                "{what} is not in view: {}",
                cut.as_str().unwrap_or("?")
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn what_asks_stays_in_view_and_the_answer_button_is_whole_on_a_phone_and_a_desktop() {
    let fx = CodexFixture::start();
    let id = fx.create(json!({ "approvalPolicy": "untrusted" }));
    // A transcript longer than the screen.
    for n in 1..=3 {
        fx.mock.push(Step::text(PLANTED));
        fx.send(&id, &format!("Turn {n}"));
        fx.wait_turns_completed(&id, n);
    }
    fx.daemon
        .put(
            &format!("/api/sessions/{id}/mode"),
            &json!({ "mode": "plan" }),
        )
        .assert_ok();

    // On the phone: two questions with options (taller than the panel) arrive while the transcript is at its end.
    let b = open(&fx.daemon, Some(&id), PHONE);
    b.wait_text("#entries", "Turn done", UI_TIMEOUT);
    fx.mock.push(Step::function_call(
        "request_user_input",
        json!({ "questions": [{
            "id": "color", "header": "Color", "question": "Which color should the new theme use?",
            "options": [
                { "label": "Red", "description": "warm, for a page that wants attention" },
                { "label": "Blue", "description": "cold, calm, the usual choice" },
                { "label": "Green", "description": "neither, and easy on the eyes" }
            ]
        }, {
            "id": "font", "header": "Font", "question": "Which font should the headings use?",
            "options": [
                { "label": "Serif", "description": "classic, for long reading" },
                { "label": "Sans", "description": "plain, the usual choice" },
                { "label": "Mono", "description": "technical, fixed width" }
            ]
        }]}),
    ));
    fx.mock.push(Step::text("Blue it is."));
    fx.send(&id, "Pick a color with me");
    b.wait_text("#requests", "Which color", TURN);
    b.wait_text("#entries", "Waiting for you: Question", UI_TIMEOUT);
    wait_in_view(&b, "the answer button", "#requests button", "Send answer");
    wait_in_view(
        &b,
        "the row that asks",
        "#entries .row",
        "Waiting for you: Question",
    );
    // The panel scrolls (a person's swipe), and its button stays whole at its foot.
    b.click_text("#requests label", "Blue");
    b.exec(
        "document.getElementById('requests').scrollTop = 1e6;",
        vec![],
    );
    b.click_text("#requests label", "Sans");
    wait_in_view(&b, "the answer button", "#requests button", "Send answer");
    b.click_text("#requests button", "Send answer");
    b.wait_text("#entries", "Blue it is.", TURN);

    // On the desktop: an approval.
    fx.daemon
        .put(
            &format!("/api/sessions/{id}/mode"),
            &json!({ "mode": "default" }),
        )
        .assert_ok();
    b.set_viewport(DESKTOP.0, DESKTOP.1);
    fx.mock.push(Step::exec("touch approved.txt"));
    fx.mock.push(Step::text("Made it."));
    fx.send(&id, "Make a file");
    b.wait_text("#requests", "Run a command", TURN);
    b.wait_text("#entries", "Waiting for you: Run a command", UI_TIMEOUT);
    wait_in_view(&b, "the approve button", "#requests button", "Allow once");
    wait_in_view(
        &b,
        "the row that asks",
        "#entries .row",
        "Waiting for you: Run a command",
    );
    b.click_text("#requests button", "Allow once");
    b.wait_text("#entries", "Made it.", TURN);
    b.assert_no_problems();
}

#[test]
fn escape_closes_what_is_open_and_the_first_tab_stop_leads_to_the_prompt() {
    let fx = CodexFixture::start();
    let id = fx.create(json!({ "approvalPolicy": "never" }));
    fx.mock.push(Step::exec("echo from-a-card"));
    fx.mock.push(Step::text("Ran it."));
    fx.send(&id, "Run something");
    fx.wait_turns_completed(&id, 1);
    let b = open(&fx.daemon, Some(&id), DESKTOP);
    b.wait_text("#entries", "Ran it.", UI_TIMEOUT);

    // From the top of the page, the first Tab stop is a visible skip link; Enter on it puts
    // the focus in the prompt.
    b.exec("document.activeElement.blur();", vec![]);
    b.press(&[Key::Tab]);
    assert_eq!(focused(&b), "skipToPrompt");
    wait_in_view(&b, "the skip link", "#skipToPrompt", "Skip to the prompt");
    b.press(&[Key::Enter]);
    assert_eq!(focused(&b), "prompt");
    b.type_active("typed after two keys");
    assert_eq!(
        b.exec("return document.getElementById('prompt').value;", vec![]),
        json!("typed after two keys")
    );

    // An open command card closes, the focus on its summary.
    b.click("#entries details.card summary");
    b.wait_for("the card to open", UI_TIMEOUT, || {
        b.exists("#entries details.card[open]").then_some(())
    });
    b.press(&[Key::Escape]);
    b.wait_for("the card to close", UI_TIMEOUT, || {
        (!b.exists("#entries details.card[open]")).then_some(())
    });
    assert_eq!(
        b.exec("return document.activeElement.tagName;", vec![]),
        json!("SUMMARY")
    );

    // The New session form closes, the focus back on its toggle.
    b.click("#newToggle");
    b.wait_visible("#newSession", UI_TIMEOUT);
    assert_eq!(focused(&b), "newCwd");
    b.press(&[Key::Escape]);
    b.wait_for("the form to close", UI_TIMEOUT, || {
        b.exec(
            "return document.getElementById('newSession').hidden;",
            vec![],
        )
        .as_bool()
        .unwrap()
        .then_some(())
    });
    assert_eq!(focused(&b), "newToggle");

    // A refused start leaves an error banner: the first Escape closes the form the focus is
    // in, the second the banner.
    b.click("#newToggle");
    b.wait_visible("#newSession", UI_TIMEOUT);
    b.type_into("#newCwd", "not/absolute");
    b.click("#newStart");
    b.wait_visible("#errors .error", UI_TIMEOUT);
    b.press(&[Key::Escape]);
    b.wait_for("the form to close", UI_TIMEOUT, || {
        b.exec(
            "return document.getElementById('newSession').hidden;",
            vec![],
        )
        .as_bool()
        .unwrap()
        .then_some(())
    });
    assert!(b.exists("#errors .error"), "one Escape closed two things");
    b.press(&[Key::Escape]);
    b.wait_for("the banner to go", UI_TIMEOUT, || {
        (!b.exists("#errors .error")).then_some(())
    });

    // On a phone, the Queue tab closes back to the transcript.
    b.set_viewport(PHONE.0, PHONE.1);
    b.click("#tabQueue");
    b.wait_visible("#queuePane", UI_TIMEOUT);
    b.press(&[Key::Escape]);
    b.wait_visible("#sessionPane", UI_TIMEOUT);
    assert_eq!(focused(&b), "tabSession");
    // The one refused start is the page's only problem.
    let problems = b.problems();
    assert!(
        problems.len() == 1
            && problems[0].contains(
                "/api/sessions - Failed to load resource: the server responded with a status of 400"
            ),
        "{problems:#?}"
    );
}

/// Every piece of text the page shows, with a contrast under WCAG's AA (4.5:1, or 3:1 for large
/// text) against what is behind it: `[text, ratio, colour, background]`. Disabled controls are
/// exempt (as in WCAG). Colours are the computed ones, backgrounds the nearest painted ancestor's.
const LOW_CONTRAST_JS: &str = "
  const rgba = (c) => { const m = c.match(/[\\d.]+/g).map(Number); return [m[0], m[1], m[2], m.length > 3 ? m[3] : 1]; };
  const lum = ([r, g, b]) => { const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); }; return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b); };
  const over = (top, under) => { const a = top[3]; return [0, 1, 2].map((i) => top[i] * a + under[i] * (1 - a)).concat([1]); };
  function background(el) {
    const layers = [];
    for (let p = el; p; p = p.parentElement) {
      const c = rgba(getComputedStyle(p).backgroundColor);
      if (c[3] > 0) { layers.push(c); if (c[3] >= 1) break; }
    }
    let color = rgba(getComputedStyle(document.documentElement).backgroundColor);
    if (color[3] < 1) color = matchMedia('(prefers-color-scheme: dark)').matches ? [0, 0, 0, 1] : [255, 255, 255, 1];
    for (const layer of layers.reverse()) color = over(layer, color);
    return color;
  }
  const out = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  const seen = new Set();
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    if (!n.textContent.trim()) continue;
    const el = n.parentElement;
    if (seen.has(el)) continue;
    seen.add(el);
    if (!el.checkVisibility({ opacityProperty: true, visibilityProperty: true })) continue;
    if (el.closest('.sr, option, datalist, script, style')) continue;
    if (el.closest('button:disabled, input:disabled, select:disabled, [aria-busy=true]')) continue;
    const r = el.getBoundingClientRect();
    if (r.width === 0 || r.height === 0) continue;
    const style = getComputedStyle(el);
    const bg = background(el);
    const fg = over(rgba(style.color), bg);
    const [hi, lo] = [lum(fg), lum(bg)].sort((a, b) => b - a);
    const ratio = (hi + 0.05) / (lo + 0.05);
    const size = parseFloat(style.fontSize), bold = Number(style.fontWeight) >= 700;
    const need = size >= 24 || (bold && size >= 18.66) ? 3 : 4.5;
    if (ratio < need) out.push([n.textContent.trim().slice(0, 40), Math.round(ratio * 100) / 100, style.color, 'rgb(' + bg.slice(0, 3).map(Math.round).join(', ') + ')']);
  }
  return out;";

/// The texts under AA contrast in the page as it is now, in the `scheme` colour scheme.
fn low_contrast(b: &Browser, scheme: &str) -> Value {
    b.cdp(
        "Emulation.setEmulatedMedia",
        json!({ "features": [{ "name": "prefers-color-scheme", "value": scheme }] }),
    );
    b.wait_for(&format!("the {scheme} scheme"), UI_TIMEOUT, || {
        b.exec(
            "return matchMedia('(prefers-color-scheme: ' + arguments[0] + ')').matches;",
            vec![json!(scheme)],
        )
        .as_bool()
        .unwrap()
        .then_some(())
    });
    b.exec(LOW_CONTRAST_JS, vec![])
}

#[test]
fn every_text_and_the_primary_buttons_meet_aa_contrast_in_light_and_dark() {
    let fx = CodexFixture::start();
    let id = fx.create(json!({ "approvalPolicy": "untrusted" }));
    fx.mock.push(Step::text(PLANTED));
    fx.send(&id, "A first answer");
    fx.wait_turns_completed(&id, 1);
    // An approval waits, a task waits behind it: badges, pills, panels and buttons of each kind.
    fx.mock.push(Step::exec("touch waiting.txt"));
    fx.send(&id, "Make a file");
    fx.wait_event(&id, "approval.requested", |e| {
        e["type"] == "approval.requested"
    });
    let queued = fx.daemon.post(
        &format!("/api/sessions/{id}/tasks"),
        &json!({ "text": "Later" }),
    );
    assert_eq!(queued.status, 202, "{}", queued.body);
    let b = open(&fx.daemon, Some(&id), DESKTOP);
    b.wait_text("#requests", "Run a command", UI_TIMEOUT);
    b.wait_text("#pending", "Later", UI_TIMEOUT);
    b.click("#newToggle");
    b.wait_visible("#newSession", UI_TIMEOUT);
    b.type_into("#prompt", "typed");

    // The primary buttons (the issue found them at 3.1:1 in dark) are among what is measured.
    let primary = b.exec(
        "return Array.from(document.querySelectorAll('button.primary')).filter((e) => !e.disabled && e.checkVisibility()).map((e) => e.textContent);",
        vec![],
    );
    assert_eq!(
        primary,
        json!(["Start session", "Allow once", "Queue task"]),
        "{primary}"
    );
    let low = json!({ "light": low_contrast(&b, "light"), "dark": low_contrast(&b, "dark") });
    assert_eq!(
        low,
        json!({ "light": [], "dark": [] }),
        "text under AA contrast: [text, ratio, colour, background]"
    );
}
