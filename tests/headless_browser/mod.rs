//! The headless browser the report tests render pages with.

use std::path::PathBuf;

/// The browser to render a page with: `$VGPU_SCHEDULER_BROWSER`, else Debian's
/// `chromium`. `None` (the test skips) only outside CI: CI installs chromium
/// (`.ci/run`), so a missing browser there is a failure, not a skip.
pub fn browser_or_skip() -> Option<PathBuf> {
    let found = std::env::var_os("VGPU_SCHEDULER_BROWSER")
        .map(PathBuf::from)
        .into_iter()
        .chain(["/usr/bin/chromium", "/usr/bin/chromium-browser"].map(PathBuf::from))
        .find(|p| p.is_file());
    if found.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "no browser: CI installs chromium (.ci/run)"
        );
        eprintln!("skipped: no headless browser (install Debian's chromium to run this test)");
    }
    found
}
