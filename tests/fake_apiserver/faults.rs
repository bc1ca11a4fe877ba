//! Test-controlled misbehaviour (injected conflicts and errors, latency), the
//! request log and the log of evictions.

use super::eviction::EvictionRecord;
use std::time::Duration;

struct Rule {
    pattern: String,
    status: u16,
    /// Matching requests let through before the rule starts failing them.
    pass: usize,
    remaining: usize,
}

/// A logged request: method, path and query, HTTP status.
pub type LogEntry = (String, String, u16);

#[derive(Default)]
pub struct Faults {
    conflicts: Vec<Rule>,
    errors: Vec<Rule>,
    lost_answers: Vec<Rule>,
    pub latency: Duration,
    pub log: Vec<LogEntry>,
    /// Every eviction request the server handled, oldest first.
    pub evictions: Vec<EvictionRecord>,
}

fn take(rules: &mut Vec<Rule>, line: &str) -> Option<u16> {
    let rule = rules
        .iter_mut()
        .find(|r| r.remaining > 0 && line.contains(&r.pattern))?;
    if rule.pass > 0 {
        rule.pass -= 1;
        return None;
    }
    rule.remaining -= 1;
    let status = rule.status;
    rules.retain(|r| r.remaining > 0);
    Some(status)
}

impl Faults {
    pub fn add_conflicts(&mut self, pattern: &str, count: usize) {
        self.conflicts.push(Rule {
            pattern: pattern.to_string(),
            status: 409,
            pass: 0,
            remaining: count,
        });
    }

    pub fn add_errors(&mut self, pattern: &str, status: u16, pass: usize, count: usize) {
        self.errors.push(Rule {
            pattern: pattern.to_string(),
            status,
            pass,
            remaining: count,
        });
    }

    pub fn add_lost_answers(&mut self, pattern: &str, status: u16, count: usize) {
        self.lost_answers.push(Rule {
            pattern: pattern.to_string(),
            status,
            pass: 0,
            remaining: count,
        });
    }

    /// Whether the write `"METHOD /path?query"` must answer 409.
    pub fn take_conflict(&mut self, line: &str) -> bool {
        take(&mut self.conflicts, line).is_some()
    }

    /// The status an injected error rule gives `"METHOD /path?query"`.
    pub fn take_error(&mut self, line: &str) -> Option<u16> {
        take(&mut self.errors, line)
    }

    /// The status that replaces the answer of `"METHOD /path?query"` after it
    /// was carried out.
    pub fn take_lost_answer(&mut self, line: &str) -> Option<u16> {
        take(&mut self.lost_answers, line)
    }

    pub fn clear(&mut self) {
        self.conflicts.clear();
        self.errors.clear();
        self.lost_answers.clear();
    }
}
