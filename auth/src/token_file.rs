//! `--token-auth-file`: static bearer tokens, one CSV record each:
//! `token,user,uid[,"group1,group2,…"]` (kube-apiserver's format).
//!
//! # Guarantees
//! - A record with fewer than 3 columns refuses the whole file (kube-apiserver's message).
//! - Records with an empty token are skipped; a repeated token takes the last record.
//! - Groups are the 4th column split on `,` (as upstream, untrimmed).
//! - A token not in the file is left to the next authenticator.

use std::collections::HashMap;
use std::path::Path;

use futures::future::BoxFuture;

use super::authn::{Authenticator, AuthnRequest, Outcome};
use super::user::UserInfo;

/// The token file cannot be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TokenFileError {
    /// The file could not be read.
    #[error("reading token file '{path}': {message}")]
    Read {
        /// The `--token-auth-file` path.
        path: String,
        /// The I/O error.
        message: String,
    },
    /// A record has fewer than the 3 required columns.
    #[error("token file '{path}' must have at least 3 columns (token, user name, user uid), found {found}")]
    Columns {
        /// The `--token-auth-file` path.
        path: String,
        /// How many columns the record has.
        found: usize,
    },
    /// A record is not valid CSV.
    #[error("token file '{path}': record {record}: {message}")]
    Csv {
        /// The `--token-auth-file` path.
        path: String,
        /// The record's number, 1-based.
        record: usize,
        /// The CSV parser's error.
        #[source]
        message: CsvError,
    },
}

/// A line that is not a CSV record (Go's `encoding/csv` messages).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CsvError {
    /// A quoted field not closed, or followed by something other than `,`.
    #[error("extraneous or missing \" in quoted-field")]
    QuotedField,
    /// A quote inside an unquoted field.
    #[error("bare \" in non-quoted-field")]
    BareQuote,
}

/// The tokens of one file.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct TokenFile {
    tokens: HashMap<String, UserInfo>,
}

impl std::fmt::Debug for TokenFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenFile")
            .field("tokens", &self.tokens.len())
            .finish()
    }
}

impl TokenFile {
    /// Reads the file at `path`.
    pub fn load(path: &Path) -> Result<TokenFile, TokenFileError> {
        let text = std::fs::read_to_string(path).map_err(|e| TokenFileError::Read {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
        TokenFile::parse(&text, &path.display().to_string())
    }

    /// Parses the file's text (`path` only names it in errors).
    pub fn parse(text: &str, path: &str) -> Result<TokenFile, TokenFileError> {
        let mut tokens = HashMap::new();
        let mut number = 0;
        for line in text.lines() {
            if line.trim().is_empty() {
                continue;
            }
            let record = csv_record(line).map_err(|message| TokenFileError::Csv {
                path: path.to_string(),
                record: number + 1,
                message,
            })?;
            if record.len() < 3 {
                return Err(TokenFileError::Columns {
                    path: path.to_string(),
                    found: record.len(),
                });
            }
            number += 1;
            if record[0].is_empty() {
                tracing::warn!(path, record = number, "empty token in the token file");
                continue;
            }
            let user = UserInfo {
                username: record[1].clone(),
                uid: record[2].clone(),
                groups: record
                    .get(3)
                    .map(|g| g.split(',').map(str::to_string).collect())
                    .unwrap_or_default(),
                ..UserInfo::default()
            };
            if tokens.insert(record[0].clone(), user).is_some() {
                tracing::warn!(path, record = number, "duplicate token in the token file");
            }
        }
        Ok(TokenFile { tokens })
    }

    /// The user of `token`, if the file has it.
    pub fn user(&self, token: &str) -> Option<&UserInfo> {
        self.tokens.get(token)
    }
}

/// One CSV record (Go's `encoding/csv` with `TrimLeadingSpace`): fields separated by `,`,
/// optionally double-quoted with `""` for a quote inside.
fn csv_record(line: &str) -> Result<Vec<String>, CsvError> {
    let mut fields = Vec::new();
    let mut chars = line.trim_end_matches('\r').chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| *c == ' ' || *c == '\t') {
            chars.next();
        }
        let mut field = String::new();
        if chars.peek() == Some(&'"') {
            chars.next();
            loop {
                match chars.next() {
                    Some('"') if chars.peek() == Some(&'"') => {
                        chars.next();
                        field.push('"');
                    }
                    Some('"') => break,
                    Some(c) => field.push(c),
                    None => return Err(CsvError::QuotedField),
                }
            }
            match chars.next() {
                None => {
                    fields.push(field);
                    return Ok(fields);
                }
                Some(',') => fields.push(field),
                Some(_) => return Err(CsvError::QuotedField),
            }
        } else {
            loop {
                match chars.next() {
                    None => {
                        fields.push(field);
                        return Ok(fields);
                    }
                    Some(',') => break,
                    Some('"') => return Err(CsvError::BareQuote),
                    Some(c) => field.push(c),
                }
            }
            fields.push(field);
        }
    }
}

impl Authenticator for TokenFile {
    fn authenticate<'a>(&'a self, req: &'a AuthnRequest<'a>) -> BoxFuture<'a, Outcome> {
        Box::pin(async move {
            match req.bearer_token().and_then(|t| self.user(t)) {
                Some(u) => Outcome::Authenticated(u.clone()),
                None => Outcome::NotApplicable,
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_users_and_groups() {
        let f = TokenFile::parse(
            "tok-1,alice,uid-1,\"dev,ops\"\n\n tok-2, bob,uid-2\n,nobody,uid-3\ntok-1,carol,uid-4,qa\n",
            "t.csv",
        )
        .unwrap();
        assert_eq!(
            f.user("tok-1"),
            Some(&UserInfo {
                username: "carol".into(),
                uid: "uid-4".into(),
                groups: vec!["qa".into()],
                ..UserInfo::default()
            }),
            "the last record of a token wins"
        );
        assert_eq!(f.user("tok-2").unwrap().username, "bob");
        assert_eq!(f.user("tok-2").unwrap().groups, Vec::<String>::new());
        assert_eq!(f.user(""), None, "empty tokens are skipped");
        let f = TokenFile::parse("t,alice,1,\"dev,ops\"", "t.csv").unwrap();
        assert_eq!(f.user("t").unwrap().groups, ["dev", "ops"]);
    }

    #[test]
    fn errors_in_kube_apiserver_words() {
        assert_eq!(
            TokenFile::parse("tok,alice\n", "/etc/tokens.csv")
                .unwrap_err()
                .to_string(),
            "token file '/etc/tokens.csv' must have at least 3 columns (token, user name, user uid), found 2"
        );
        assert!(matches!(
            TokenFile::parse("t,a,1,\"dev\n", "f"),
            Err(TokenFileError::Csv { record: 1, .. })
        ));
        assert!(matches!(
            TokenFile::parse("t,a\"b,1\n", "f"),
            Err(TokenFileError::Csv { .. })
        ));
    }

    #[test]
    fn csv_quoting() {
        assert_eq!(
            csv_record(r#"a,"b ""c"", d",  e"#).unwrap(),
            ["a", "b \"c\", d", "e"]
        );
        assert_eq!(csv_record("a,,").unwrap(), ["a", "", ""]);
    }

    #[test]
    fn authenticates_known_tokens_only() {
        let f = TokenFile::parse("secret,alice,1,dev", "f").unwrap();
        let run = |token: &str| {
            let mut h = axum::http::HeaderMap::new();
            h.insert("authorization", format!("Bearer {token}").parse().unwrap());
            let req = AuthnRequest {
                headers: &h,
                peer_certs: &[],
                path: "/api",
            };
            futures::executor::block_on(f.authenticate(&req))
        };
        assert!(matches!(run("secret"), Outcome::Authenticated(u) if u.username == "alice"));
        assert_eq!(run("other"), Outcome::NotApplicable);
    }
}
