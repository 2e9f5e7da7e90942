//! The tidy tests: the layering rules of docs/ARCHITECTURE.md ("Layers") checked on the parsed
//! source, and the `//!` paragraph every file starts with.
//!
//! Each file is parsed (`syn`) and every reference it makes is collected: each leaf of every
//! `use` tree (grouped imports included), every path in the code, and the paths inside macro
//! calls (`matches!`, `json!`, `tracing::…!`). `crate::`, `self::` and `super::` are resolved
//! to the module they name, from the file's place in the tree and its inline modules. Items
//! under `#[cfg(test)]` are left out wherever they stand (not the rest of the file after the
//! first one), and so are the files that are test modules (`tests.rs`, `*_tests.rs`).
//!
//! And no production file grows past [`MAX_CODE_LINES`] code lines (not blank, not a comment,
//! not under `#[cfg(test)]`): a file that big mixes concerns and gets split by them.

use std::path::{Path, PathBuf};

use proc_macro2::{TokenStream, TokenTree};
use syn::visit::Visit;

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every crate's production sources: the daemon's and the protocol's (the pane programs are
/// small binaries of their own, checked by their own tests).
fn source_roots() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    vec![root.join("src"), root.join("protocol/src")]
}

/// The external crates a rule may name (a path starting with one of them is the crate's).
const EXTERNAL: [&str; 2] = ["axum", "rmcp"];

/// What one file refers to: resolved module paths (`["core", "ring", "Ring"]`; an external
/// crate's as `["::axum", …]`) and, for the rules on names, every path as written.
#[derive(Debug, Default)]
struct References {
    resolved: Vec<Vec<String>>,
    written: Vec<Vec<String>>,
}

struct Collector {
    /// The module being read (`["core", "ring"]`), inline modules included.
    module: Vec<String>,
    refs: References,
}

fn is_cfg_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|attr| {
        attr.path().is_ident("cfg")
            && attr.meta.require_list().is_ok_and(|list| {
                list.tokens
                    .to_string()
                    .split_whitespace()
                    .any(|w| w == "test")
            })
    })
}

fn item_attrs(item: &syn::Item) -> &[syn::Attribute] {
    use syn::Item;
    match item {
        Item::Const(i) => &i.attrs,
        Item::Enum(i) => &i.attrs,
        Item::ExternCrate(i) => &i.attrs,
        Item::Fn(i) => &i.attrs,
        Item::ForeignMod(i) => &i.attrs,
        Item::Impl(i) => &i.attrs,
        Item::Macro(i) => &i.attrs,
        Item::Mod(i) => &i.attrs,
        Item::Static(i) => &i.attrs,
        Item::Struct(i) => &i.attrs,
        Item::Trait(i) => &i.attrs,
        Item::TraitAlias(i) => &i.attrs,
        Item::Type(i) => &i.attrs,
        Item::Union(i) => &i.attrs,
        Item::Use(i) => &i.attrs,
        _ => &[],
    }
}

impl Collector {
    /// `segments` as an absolute module path, when it names one of the crate's modules or an
    /// external crate a rule knows; `None` for a local name (its `use` is checked instead).
    fn resolve(&self, segments: &[String]) -> Option<Vec<String>> {
        let (first, rest) = segments.split_first()?;
        match first.as_str() {
            "crate" => Some(rest.to_vec()),
            "self" => Some(self.module.iter().chain(rest).cloned().collect()),
            "super" => {
                let mut base = self.module.clone();
                let mut rest = segments;
                while let Some((first, tail)) = rest.split_first()
                    && first == "super"
                {
                    base.pop();
                    rest = tail;
                }
                Some(base.into_iter().chain(rest.iter().cloned()).collect())
            }
            name if EXTERNAL.contains(&name.trim_start_matches("::")) => Some(
                std::iter::once(format!("::{}", name.trim_start_matches("::")))
                    .chain(rest.iter().cloned())
                    .collect(),
            ),
            _ => None,
        }
    }

    fn record(&mut self, segments: Vec<String>) {
        if let Some(resolved) = self.resolve(&segments) {
            self.refs.resolved.push(resolved);
        }
        self.refs.written.push(segments);
    }

    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(path) => {
                prefix.push(path.ident.to_string());
                self.use_tree(prefix, &path.tree);
                prefix.pop();
            }
            syn::UseTree::Name(name) => {
                let mut full = prefix.clone();
                full.push(name.ident.to_string());
                self.record(full);
            }
            syn::UseTree::Rename(rename) => {
                let mut full = prefix.clone();
                full.push(rename.ident.to_string());
                self.record(full);
            }
            syn::UseTree::Glob(_) => self.record(prefix.clone()),
            syn::UseTree::Group(group) => {
                for tree in &group.items {
                    self.use_tree(prefix, tree);
                }
            }
        }
    }

    /// The paths in a macro's tokens: runs of `ident :: ident …`.
    fn tokens(&mut self, tokens: TokenStream) {
        let mut run: Vec<String> = Vec::new();
        let mut colons = 0;
        let flush = |run: &mut Vec<String>, this: &mut Collector| {
            if run.len() > 1 {
                this.record(std::mem::take(run));
            }
            run.clear();
        };
        for tree in tokens {
            match tree {
                TokenTree::Ident(ident) => {
                    if run.is_empty() || colons == 2 {
                        run.push(ident.to_string());
                    } else {
                        flush(&mut run, self);
                        run.push(ident.to_string());
                    }
                    colons = 0;
                }
                TokenTree::Punct(punct) if punct.as_char() == ':' && colons < 2 => colons += 1,
                TokenTree::Group(group) => {
                    flush(&mut run, self);
                    colons = 0;
                    self.tokens(group.stream());
                }
                _ => {
                    flush(&mut run, self);
                    colons = 0;
                }
            }
        }
        flush(&mut run, self);
    }
}

impl<'ast> Visit<'ast> for Collector {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        if is_cfg_test(item_attrs(item)) {
            return;
        }
        syn::visit::visit_item(self, item);
    }

    fn visit_item_mod(&mut self, module: &'ast syn::ItemMod) {
        self.module.push(module.ident.to_string());
        syn::visit::visit_item_mod(self, module);
        self.module.pop();
    }

    fn visit_impl_item(&mut self, item: &'ast syn::ImplItem) {
        let attrs = match item {
            syn::ImplItem::Fn(f) => &f.attrs[..],
            syn::ImplItem::Const(c) => &c.attrs[..],
            syn::ImplItem::Type(t) => &t.attrs[..],
            _ => &[],
        };
        if !is_cfg_test(attrs) {
            syn::visit::visit_impl_item(self, item);
        }
    }

    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        let mut prefix = Vec::new();
        if item.leading_colon.is_some()
            && let syn::UseTree::Path(path) = &item.tree
        {
            prefix.push(format!("::{}", path.ident));
            self.use_tree(&mut prefix, &path.tree);
            return;
        }
        self.use_tree(&mut prefix, &item.tree);
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        let mut segments: Vec<String> = path
            .segments
            .iter()
            .map(|segment| segment.ident.to_string())
            .collect();
        if path.leading_colon.is_some()
            && let Some(first) = segments.first_mut()
        {
            *first = format!("::{first}");
        }
        self.record(segments);
        syn::visit::visit_path(self, path);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        syn::visit::visit_macro(self, mac);
        self.tokens(mac.tokens.clone());
    }
}

/// What `code` (the file of module `module`) refers to.
fn references(module: &[String], code: &str) -> Result<References, String> {
    let file = syn::parse_file(code).map_err(|e| e.to_string())?;
    let mut collector = Collector {
        module: module.to_vec(),
        refs: References::default(),
    };
    collector.visit_file(&file);
    Ok(collector.refs)
}

/// The module a file under `src/` is (`core/ring.rs` → `["core", "ring"]`, `core/mod.rs` →
/// `["core"]`, `lib.rs` → `[]`).
fn module_of(relative: &Path) -> Vec<String> {
    let mut parts: Vec<String> = relative
        .iter()
        .map(|part| part.to_string_lossy().into_owned())
        .collect();
    if let Some(last) = parts.pop() {
        let stem = last.trim_end_matches(".rs");
        if stem != "mod" && stem != "lib" {
            parts.push(stem.to_string());
        }
    }
    parts
}

/// Every library source file under `src/<path>` (a file or a directory) with its references,
/// as `(path shown, references)`. Test-module files are skipped; so is `main.rs` (the binary).
fn files(path: &str) -> Vec<(String, References)> {
    let mut out = Vec::new();
    let root = src().join(path);
    assert!(
        root.exists(),
        "a layering rule names `src/{path}`, which does not exist: the module moved, so the rule checks nothing"
    );
    let mut stack = vec![root];
    while let Some(path) = stack.pop() {
        if path.is_dir() {
            for entry in std::fs::read_dir(&path).unwrap() {
                stack.push(entry.unwrap().path());
            }
            continue;
        }
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if !name.ends_with(".rs")
            || name == "tests.rs"
            || name.ends_with("_tests.rs")
            || path == src().join("main.rs")
        {
            continue;
        }
        let relative = path.strip_prefix(src()).unwrap().to_path_buf();
        let code = std::fs::read_to_string(&path).unwrap();
        let refs = references(&module_of(&relative), &code)
            .unwrap_or_else(|e| panic!("{}: {e}", relative.display()));
        out.push((relative.display().to_string(), refs));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// A module path (`"runtime::claude"`, `"::axum"`) as segments.
fn segments(target: &str) -> Vec<String> {
    let external = target.starts_with("::");
    let mut parts: Vec<String> = target
        .trim_start_matches("::")
        .split("::")
        .map(str::to_string)
        .collect();
    if external {
        parts[0] = format!("::{}", parts[0]);
    }
    parts
}

/// The rules broken by the files under `sources`: each refers to none of `targets` (module
/// paths, or `::crate` for an external crate).
fn forbid(broken: &mut Vec<String>, sources: &[&str], targets: &[&str], why: &str) {
    for source in sources {
        for (file, refs) in files(source) {
            for target in targets {
                let target_segments = segments(target);
                if let Some(hit) = refs
                    .resolved
                    .iter()
                    .find(|path| path.starts_with(&target_segments))
                {
                    broken.push(format!("{file} refers to `{}`: {why}", hit.join("::")));
                }
            }
        }
    }
}

/// The rule on names: no path in `sources` spells `words` (`["Runtime", "Codex"]`) in a row.
fn forbid_names(broken: &mut Vec<String>, sources: &[&str], words: &[&[&str]], why: &str) {
    for source in sources {
        for (file, refs) in files(source) {
            for word in words {
                if refs
                    .written
                    .iter()
                    .any(|path| path.windows(word.len()).any(|w| w == *word))
                {
                    broken.push(format!("{file} names `{}`: {why}", word.join("::")));
                }
            }
        }
    }
}

/// The layering rules of docs/ARCHITECTURE.md ("Layers"), checked on the code.
#[test]
fn modules_import_only_what_their_layer_allows() {
    let mut broken = Vec::new();
    let program = ["daemon", "cli", "client", "config", "commands"];
    // The daemon wires the runtimes through the registry (`Hosts::start`), naming none.
    forbid(
        &mut broken,
        &["daemon.rs"],
        &[
            "runtime::codex",
            "runtime::claude",
            "runtime::opencode",
            "runtime::pi",
        ],
        "the daemon starts the runtimes through `Hosts::start`, naming none",
    );
    // Surfaces are siblings over the service.
    forbid(
        &mut broken,
        &["http"],
        &["mcp"],
        "surfaces do not import each other",
    );
    forbid(
        &mut broken,
        &["mcp"],
        &["http"],
        "surfaces do not import each other",
    );
    forbid(
        &mut broken,
        &["http", "mcp"],
        &["core", "runtime", "tasks", "tmux", "watch", "tail"],
        "surfaces reach the rest through the service",
    );
    forbid(
        &mut broken,
        &["http", "mcp"],
        &program,
        "surfaces do not reach up into the program",
    );
    // The service is below the surfaces and the program.
    forbid(
        &mut broken,
        &["service"],
        &["http", "mcp", "daemon", "cli", "client", "commands"],
        "the service imports nothing above it",
    );
    // The queue is below the service.
    forbid(
        &mut broken,
        &["tasks"],
        &[
            "service", "http", "mcp", "daemon", "cli", "client", "commands",
        ],
        "the queue imports nothing above it",
    );
    // Runtimes do not know each other, nor anything above them.
    forbid(
        &mut broken,
        &["runtime/codex"],
        &["runtime::claude", "runtime::opencode", "runtime::pi"],
        "runtimes do not import each other",
    );
    forbid(
        &mut broken,
        &["runtime/claude"],
        &["runtime::codex", "runtime::opencode", "runtime::pi"],
        "runtimes do not import each other",
    );
    forbid(
        &mut broken,
        &["runtime/opencode"],
        &["runtime::codex", "runtime::claude", "runtime::pi"],
        "runtimes do not import each other",
    );
    forbid(
        &mut broken,
        &["runtime/pi"],
        &["runtime::codex", "runtime::claude", "runtime::opencode"],
        "runtimes do not import each other",
    );
    forbid(
        &mut broken,
        &["runtime/common"],
        &[
            "runtime::codex",
            "runtime::claude",
            "runtime::opencode",
            "runtime::pi",
        ],
        "common code imports no runtime",
    );
    forbid(
        &mut broken,
        &["runtime"],
        &[
            "service", "tasks", "http", "mcp", "watch", "daemon", "cli", "client", "commands",
        ],
        "the runtimes import nothing above or beside them but tmux and tail",
    );
    // The watchers sit beside the runtimes: protocol, formats, core, tmux and tail only.
    forbid(
        &mut broken,
        &["watch"],
        &[
            "runtime", "service", "http", "mcp", "tasks", "daemon", "cli", "client", "commands",
            "::axum", "::rmcp",
        ],
        "watch imports protocol, formats, core, tmux and tail only",
    );
    // tmux and tail are leaves beside the runtimes (the runtimes and the watchers import tail).
    forbid(
        &mut broken,
        &["tmux", "tail"],
        &[
            "runtime", "service", "http", "mcp", "tasks", "watch", "daemon", "cli", "client",
            "commands", "formats",
        ],
        "tmux and tail import protocol and core only",
    );
    // The peers' formats sit below the runtimes and the watchers: protocol only.
    forbid(
        &mut broken,
        &["formats"],
        &[
            "core",
            "runtime",
            "service",
            "http",
            "mcp",
            "tasks",
            "tmux",
            "tail",
            "watch",
            "daemon",
            "config",
            "cli",
            "client",
            "commands",
            "redact",
            "peers",
            "notifier",
            "local_socket",
            "::axum",
            "::rmcp",
        ],
        "formats imports protocol only",
    );
    // Federation reads the log and calls the service layer; it is no second writer, and
    // nothing below the program (core, service, the surfaces, the runtimes) imports it.
    forbid(
        &mut broken,
        &[
            "core", "service", "http", "mcp", "tasks", "runtime", "watch", "tmux", "tail",
            "formats",
        ],
        &["federation"],
        "federation is a reader of the log and a client of the service: only the program wires it",
    );
    forbid(
        &mut broken,
        &["federation"],
        &[
            "http", "mcp", "runtime", "tasks", "watch", "tmux", "daemon", "cli", "client",
            "commands", "::axum", "::rmcp",
        ],
        "federation reads the log and calls the service, nothing else of the daemon",
    );
    // The core imports only the protocol; the protocol imports nothing.
    let others = [
        "federation",
        "runtime",
        "service",
        "http",
        "mcp",
        "tasks",
        "tmux",
        "tail",
        "daemon",
        "config",
        "cli",
        "client",
        "commands",
        "redact",
        "peers",
        "watch",
        "notifier",
        "local_socket",
        "formats",
    ];
    forbid(
        &mut broken,
        &["core"],
        &others,
        "the core imports only the protocol",
    );
    // The protocol is a crate of its own (`protocol/`): it cannot import the daemon at all.
    // Nothing below the surfaces knows HTTP or MCP.
    forbid(
        &mut broken,
        &[
            "core",
            "runtime",
            "service",
            "tasks",
            "tmux",
            "tail",
            "redact.rs",
            "peers.rs",
            "watch",
            "formats",
        ],
        &["::axum", "::rmcp", "http", "mcp"],
        "nothing below the surfaces imports axum, rmcp or a surface",
    );
    // The runtimes are named only by the protocol, the registry and themselves.
    forbid_names(
        &mut broken,
        &["core", "service", "http", "mcp", "tasks", "runtime/common"],
        &[
            &["Runtime", "Codex"],
            &["Runtime", "Claude"],
            &["Runtime", "Opencode"],
            &["Runtime", "Pi"],
        ],
        "`match Runtime` appears only where the registry is built (runtime/mod.rs)",
    );
    assert!(broken.is_empty(), "layering broken:\n{}", broken.join("\n"));
}

/// What the Matrix bridge (`matrix/`, the `cohost-matrix` binary) may use of the library: the
/// daemon's HTTP client, the config file's reader (and the home), the redaction. It is a client
/// of the HTTP API and a reader of the event stream, never a second writer (docs/matrix.md).
const BRIDGE_MAY_USE: [&str; 3] = ["client", "config", "redact"];

/// The paths of `code` (a file of the bridge) into the library beyond [`BRIDGE_MAY_USE`].
/// Federation is a reader of the log: the publisher and the hub (its consumer in
/// `federation`, its world in `service/hub.rs`) never append to this machine's log — another
/// machine's events live in the hub's world and its copies, never as this machine's own. No
/// file of theirs names what an append takes (an event kind, the core's input) or calls the
/// core's `append` or `publish`.
#[test]
fn federation_never_writes_the_log() {
    let mut broken = Vec::new();
    let readers = [
        "federation",
        "service/hub.rs",
        "service/hub",
        "service/hub_tasks.rs",
        "service/hub_tasks",
    ];
    forbid(
        &mut broken,
        &readers,
        &[
            "protocol::EventKind",
            "protocol::event::EventKind",
            "core::CoreInput",
        ],
        "federation never appends to the log (the core is its machine's single writer)",
    );
    for source in readers {
        for (file, _) in files(source) {
            let code = std::fs::read_to_string(src().join(&file)).unwrap();
            for call in ["core.append(", "core.publish(", ".append_event("] {
                if code.contains(call) {
                    broken.push(format!(
                        "{file} calls `{call}…)`: federation never appends to the log"
                    ));
                }
            }
        }
    }
    assert!(broken.is_empty(), "a second writer:\n{}", broken.join("\n"));
}

fn bridge_refs_beyond_the_client(code: &str) -> Result<Vec<String>, String> {
    let refs = references(&[], code)?;
    Ok(refs
        .written
        .iter()
        .filter(|path| path.first().map(|s| s.trim_start_matches("::")) == Some("cohost"))
        .filter(|path| {
            !path
                .get(1)
                .is_some_and(|m| BRIDGE_MAY_USE.contains(&m.as_str()))
        })
        .map(|path| path.join("::"))
        .collect())
}

#[test]
fn the_matrix_bridge_uses_only_the_client_side_of_the_library() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("matrix/src");
    let mut broken = Vec::new();
    let mut read = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        read += 1;
        let code = std::fs::read_to_string(&path).unwrap();
        for hit in bridge_refs_beyond_the_client(&code)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        {
            broken.push(format!("{} refers to `{hit}`", path.display()));
        }
    }
    assert!(read > 0, "no bridge sources under {}", dir.display());
    assert!(
        broken.is_empty(),
        "the Matrix bridge uses only {BRIDGE_MAY_USE:?} of the library:\n{}",
        broken.join("\n")
    );
    // The rule sees a use, a call path and a glob.
    let code = "use cohost::service::Service;\nfn f() { cohost::core::start(); let _ = cohost::client::Client::new(None); }\nuse cohost::*;\n";
    assert_eq!(
        bridge_refs_beyond_the_client(code).unwrap(),
        ["cohost::service::Service", "cohost::core::start", "cohost"]
    );
}

/// Every source file starts with a `//!` paragraph saying what it owns.
#[test]
fn every_module_has_a_doc_paragraph() {
    fn visit(dir: &Path, missing: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                visit(&path, missing);
            } else if path.extension().is_some_and(|ext| ext == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                if !text.starts_with("//!") {
                    missing.push(path.display().to_string());
                }
            }
        }
    }
    let mut missing = Vec::new();
    for root in source_roots() {
        visit(&root, &mut missing);
    }
    assert!(
        missing.is_empty(),
        "files without a //! header: {missing:?}"
    );
}

/// The most code lines a production file may hold.
const MAX_CODE_LINES: usize = 800;

/// Lines of `code` that are code: not blank, not a `//` comment, not inside an item (or impl
/// item) under `#[cfg(test)]`, attributes included.
fn code_lines(code: &str) -> Result<usize, String> {
    use syn::spanned::Spanned;
    struct TestLines(Vec<bool>);
    impl TestLines {
        fn mark(&mut self, span: proc_macro2::Span) {
            for line in span.start().line..=span.end().line {
                if let Some(slot) = self.0.get_mut(line) {
                    *slot = true;
                }
            }
        }
    }
    impl<'ast> Visit<'ast> for TestLines {
        fn visit_item(&mut self, item: &'ast syn::Item) {
            if is_cfg_test(item_attrs(item)) {
                self.mark(item.span());
            } else {
                syn::visit::visit_item(self, item);
            }
        }
        fn visit_impl_item(&mut self, item: &'ast syn::ImplItem) {
            let attrs = match item {
                syn::ImplItem::Fn(f) => &f.attrs[..],
                syn::ImplItem::Const(c) => &c.attrs[..],
                syn::ImplItem::Type(t) => &t.attrs[..],
                _ => &[],
            };
            if is_cfg_test(attrs) {
                self.mark(item.span());
            } else {
                syn::visit::visit_impl_item(self, item);
            }
        }
    }
    let file = syn::parse_file(code).map_err(|e| e.to_string())?;
    // Lines are 1-based, as spans count them.
    let mut tests = TestLines(vec![false; code.lines().count() + 1]);
    tests.visit_file(&file);
    Ok(code
        .lines()
        .enumerate()
        .filter(|(index, line)| {
            let line = line.trim();
            !tests.0[index + 1] && !line.is_empty() && !line.starts_with("//")
        })
        .count())
}

/// No production file holds more than [`MAX_CODE_LINES`] code lines.
#[test]
fn no_production_file_is_over_800_code_lines() {
    let mut stack = source_roots();
    let mut sizes = Vec::new();
    while let Some(path) = stack.pop() {
        if path.is_dir() {
            for entry in std::fs::read_dir(&path).unwrap() {
                stack.push(entry.unwrap().path());
            }
            continue;
        }
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if !name.ends_with(".rs") || name == "tests.rs" || name.ends_with("_tests.rs") {
            continue;
        }
        let code = std::fs::read_to_string(&path).unwrap();
        let lines = code_lines(&code).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        sizes.push((lines, path.display().to_string()));
    }
    sizes.sort();
    let over: Vec<_> = sizes.iter().filter(|(n, _)| *n > MAX_CODE_LINES).collect();
    assert!(
        over.is_empty(),
        "files over {MAX_CODE_LINES} code lines (split them by concern): {over:?}"
    );
}

/// The count leaves out blank lines, comments and test items wherever they stand.
#[test]
fn code_lines_leave_out_comments_and_tests() {
    let code = "//! doc\n\nuse a::b;\n// note\nfn f() {\n    g();\n}\n#[cfg(test)]\nfn t() {\n    h();\n}\nimpl A {\n    #[cfg(test)]\n    fn t() {}\n    fn u() {}\n}\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn x() {}\n}\n";
    assert_eq!(code_lines(code), Ok(7));
}

/// The collector on written inputs: what each kind of reference resolves to.
#[test]
fn references_are_resolved_the_way_the_compiler_reads_them() {
    let check = |module: &[&str], code: &str, expect: &[&str]| {
        let module: Vec<String> = module.iter().map(|s| s.to_string()).collect();
        let refs = references(&module, code).unwrap();
        let got: Vec<String> = refs.resolved.iter().map(|p| p.join("::")).collect();
        assert_eq!(got, expect, "{code}");
    };
    // A grouped import, each leaf.
    check(
        &["core"],
        "use crate::{http, protocol::Event};",
        &["http", "protocol::Event"],
    );
    // `super::` and `self::`, from a nested file and an inline module.
    check(
        &["runtime", "codex", "host"],
        "use super::super::claude::Normalizer; mod inner { use self::x::Y; use super::z; }",
        &[
            "runtime::claude::Normalizer",
            "runtime::codex::host::inner::x::Y",
            "runtime::codex::host::z",
        ],
    );
    // A path in code and in a macro's arguments; an external crate by its name.
    check(
        &["service"],
        "fn f() { let _ = crate::tasks::Queue::new(); tracing::debug!(\"{}\", crate::mcp::NAME); axum::serve(); }",
        &["tasks::Queue::new", "mcp::NAME", "::axum::serve"],
    );
    // Items under `#[cfg(test)]` are left out wherever they are, and only they.
    check(
        &["core"],
        "#[cfg(test)] mod tests { use crate::http; }\n#[cfg(test)] use crate::mcp;\nuse crate::runtime::X;\nimpl A { #[cfg(test)] fn t() { crate::tmux::f(); } fn g() { crate::watch::f(); } }",
        &["runtime::X", "watch::f"],
    );
}
