//! Build metadata for `hami_build_info`: the source revision, the build date and the
//! compiler version, passed to the crate as environment variables. Nothing here may
//! fail a build: without git (a source archive, a container build that leaves `.git`
//! out) the revision is "unknown".
//!
//! `VGPU_SCHEDULER_REVISION` and `VGPU_SCHEDULER_BUILD_DATE` set at build time win
//! (for builds without a git checkout); `SOURCE_DATE_EPOCH` fixes the build date for
//! reproducible builds.

use std::path::Path;
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    for var in [
        "VGPU_SCHEDULER_REVISION",
        "VGPU_SCHEDULER_BUILD_DATE",
        "SOURCE_DATE_EPOCH",
    ] {
        println!("cargo:rerun-if-env-changed={var}");
    }

    let revision = non_empty_env("VGPU_SCHEDULER_REVISION")
        .or_else(|| {
            watch_git_head();
            git(&["rev-parse", "HEAD"])
        })
        .unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=VGPU_SCHEDULER_REVISION={revision}");

    let build_date = non_empty_env("VGPU_SCHEDULER_BUILD_DATE")
        .or_else(|| {
            let seconds = match non_empty_env("SOURCE_DATE_EPOCH") {
                Some(epoch) => epoch.parse().ok()?,
                None => SystemTime::now().duration_since(UNIX_EPOCH).ok()?.as_secs(),
            };
            Some(rfc3339_utc(seconds))
        })
        .unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=VGPU_SCHEDULER_BUILD_DATE={build_date}");

    // "rustc 1.89.0 (29483883e 2025-08-04)" -> "rustc 1.89.0", as Go reports "go1.22.5".
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_string());
    let rustc_version = run(Command::new(rustc).arg("--version"))
        .map(|v| v.split_whitespace().take(2).collect::<Vec<_>>().join(" "))
        .unwrap_or_default();
    println!("cargo:rustc-env=VGPU_SCHEDULER_RUSTC_VERSION={rustc_version}");
}

fn non_empty_env(name: &str) -> Option<String> {
    std::env::var(name)
        .ok()
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

/// Runs git in the package directory; `None` if git is missing or fails.
fn git(args: &[&str]) -> Option<String> {
    let dir = std::env::var("CARGO_MANIFEST_DIR").ok()?;
    run(Command::new("git").arg("-C").arg(dir).args(args))
}

fn run(command: &mut Command) -> Option<String> {
    let output = command.output().ok()?;
    if !output.status.success() {
        return None;
    }
    let text = String::from_utf8(output.stdout).ok()?.trim().to_string();
    (!text.is_empty()).then_some(text)
}

/// Re-runs this script when the checked-out commit changes: HEAD, the branch it
/// points to, and packed refs. Only files that exist are named (a missing one would
/// make every build re-run the script).
fn watch_git_head() {
    let mut paths = vec!["HEAD".to_string(), "packed-refs".to_string()];
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
        paths.push(branch);
    }
    let Ok(dir) = std::env::var("CARGO_MANIFEST_DIR") else {
        return;
    };
    for path in paths {
        // Relative answers are relative to the package directory (`git -C`).
        if let Some(file) =
            git(&["rev-parse", "--git-path", &path]).map(|f| Path::new(&dir).join(f))
            && file.exists()
        {
            println!("cargo:rerun-if-changed={}", file.display());
        }
    }
}

/// `seconds` since the epoch as `YYYY-MM-DDTHH:MM:SSZ` (the format of HAMi's
/// build date), without a date library.
fn rfc3339_utc(seconds: u64) -> String {
    let days = (seconds / 86_400) as i64;
    let rest = seconds % 86_400;
    // Howard Hinnant's days-to-civil algorithm.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rest / 3_600,
        rest % 3_600 / 60,
        rest % 60
    )
}
