//! The names of an app state's files and what each name says the file is: a module's
//! Terraform state (`<moduleId>.tfstate`), a journal file of one command
//! (`journal.<id>.<command>[.terraform|.<md5>].json`), or another JSON file (`models.json`).
//! Pure: the name alone decides; the body's checks are `change.rs`'s.

use serde::{Deserialize, Serialize};

use crate::domain::name::check_name;
use crate::domain::Refusal;

/// What a file's name says it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum FileKind {
    /// A module's Terraform state: checked as a state document.
    Tfstate,
    /// A journal file, with the command it came from.
    Journal { command: String },
    /// Any other JSON file.
    Json,
}

impl FileKind {
    pub fn as_str(&self) -> &'static str {
        match self {
            FileKind::Tfstate => "tfstate",
            FileKind::Journal { .. } => "journal",
            FileKind::Json => "json",
        }
    }

    /// The command a journal file came from.
    pub fn command(&self) -> Option<&str> {
        match self {
            FileKind::Journal { command } => Some(command),
            _ => None,
        }
    }
}

/// A file name, checked, and its kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileName {
    pub name: String,
    pub kind: FileKind,
}

impl FileName {
    /// # Errors
    /// `InvalidFileName` saying what is wrong with the name.
    pub fn parse(raw: &str) -> Result<Self, Refusal> {
        let refuse = |reason: String| Refusal::InvalidFileName { reason };
        check_name("file", raw).map_err(|e| refuse(e.to_string()))?;
        let kind = if raw.starts_with("journal.") {
            journal_kind(raw).ok_or_else(|| {
                refuse(format!("{raw:?} starts with \"journal.\" but is not a journal file's name: journal.<id>.<command>.json, journal.<id>.<command>.terraform.json or journal.<id>.<command>.<md5>.json"))
            })?
        } else if raw.len() > ".tfstate".len() && raw.ends_with(".tfstate") {
            FileKind::Tfstate
        } else if raw.len() > ".json".len() && raw.ends_with(".json") {
            FileKind::Json
        } else {
            return Err(refuse(format!(
                "{raw:?} must end in .tfstate (a module's Terraform state) or .json"
            )));
        };
        Ok(Self {
            name: raw.to_owned(),
            kind,
        })
    }
}

/// `journal.<id>.<command>[.terraform|.<md5>].json`, where a command's id is the time it
/// started, `-`, then hex digits.
fn journal_kind(raw: &str) -> Option<FileKind> {
    let parts: Vec<&str> = raw.split('.').collect();
    let (id, command, extra) = match parts.as_slice() {
        ["journal", id, command, "json"] => (*id, *command, None),
        ["journal", id, command, extra, "json"] => (*id, *command, Some(*extra)),
        _ => return None,
    };
    let (time, suffix) = id.split_once('-')?;
    let digits = |s: &str, f: fn(&char) -> bool| !s.is_empty() && s.chars().all(|c| f(&c));
    if !digits(time, char::is_ascii_digit) || !digits(suffix, char::is_ascii_hexdigit) {
        return None;
    }
    let mut chars = command.chars();
    let starts_with_letter = chars.next().is_some_and(|c| c.is_ascii_alphabetic());
    if !starts_with_letter || !chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-')) {
        return None;
    }
    let md5 = |s: &str| s.len() == 32 && s.chars().all(|c| c.is_ascii_hexdigit());
    match extra {
        None => {}
        Some("terraform") => {}
        Some(e) if md5(e) => {}
        Some(_) => return None,
    }
    Some(FileKind::Journal {
        command: command.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(raw: &str) -> Result<FileKind, Refusal> {
        FileName::parse(raw).map(|f| f.kind)
    }

    fn journal(command: &str) -> FileKind {
        FileKind::Journal {
            command: command.into(),
        }
    }

    #[test]
    fn the_spec_s_journal_files_are_listed_with_their_command() {
        for (name, command) in [
            ("journal.1791692243700-a690d91d.generate.json", "generate"),
            (
                "journal.1791692243700-a690d91d.generate.f793c0d6cea01dba9aa521449489482f.json",
                "generate",
            ),
            (
                "journal.1791692244187-30dd727f.validate.terraform.json",
                "validate",
            ),
            ("journal.1791692257972-3e0cd513.apply.json", "apply"),
            ("journal.1791692267354-d74b1acd.commit.json", "commit"),
            (
                "journal.1791692267354-d74b1acd.run-action.json",
                "run-action",
            ),
        ] {
            assert_eq!(kind(name), Ok(journal(command)), "{name}");
        }
    }

    #[test]
    fn state_files_and_other_json_files() {
        assert_eq!(kind("account-aws.tfstate"), Ok(FileKind::Tfstate));
        assert_eq!(kind("models.json"), Ok(FileKind::Json));
        assert_eq!(kind("resources-actual.json"), Ok(FileKind::Json));
    }

    #[test]
    fn names_that_are_not_journal_files_but_say_so_are_refused() {
        for name in [
            "journal.json",
            "journal.x.json",
            "journal.123.apply.json",
            "journal.123-zz.apply.json",
            "journal.123-ab.9apply.json",
            "journal.123-ab.apply.notes.json",
            "journal.123-ab.apply.terraform.extra.json",
        ] {
            assert!(
                matches!(kind(name), Err(Refusal::InvalidFileName { .. })),
                "{name}"
            );
        }
    }

    #[test]
    fn other_names_are_refused_in_words() {
        for name in [
            "", ".tfstate", "a.txt", "json", "a/b.json", "..json", "x y.json",
        ] {
            match kind(name) {
                Err(Refusal::InvalidFileName { reason }) => assert!(!reason.is_empty()),
                other => panic!("{name:?}: {other:?}"),
            }
        }
    }
}
