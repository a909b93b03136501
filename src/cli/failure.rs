//! How a client command shows a request that failed: in the command line's
//! own terms on stderr and, with `--json`, as an error object on stdout, so
//! a script reading JSON always gets JSON.
//!
//! The locker's error text is part of the wire contract (other clients and
//! the golden bytes depend on it) and names protocol ops; this module only
//! rewrites those pointers into the commands that do the same from a shell.
//! It never changes what is sent or decided.

use super::fail;
use crate::client::ClientError;

/// Prints `e` for a person (and as JSON with `json`); returns the error exit code.
pub(crate) fn request_failed(e: &ClientError, json: bool) -> u8 {
    let message = match e {
        ClientError::Refused(why) => format!("the locker refused the request: {}", in_cli_terms(why)),
        other => other.to_string(),
    };
    if json {
        let object = serde_json::json!({ "error": message, "kind": kind(e) });
        println!("{object}");
    }
    fail(message)
}

/// A stable name for what went wrong, for scripts.
fn kind(e: &ClientError) -> &'static str {
    match e {
        ClientError::NoEndpoints => "no_endpoints",
        ClientError::NoAnswer { .. } => "no_answer",
        ClientError::Refused(_) => "refused",
        ClientError::BadReply(_) => "bad_reply",
        ClientError::Zmq { .. } => "zmq",
        ClientError::Key(_) => "key",
    }
}

/// The locker's words with its pointers to ops ("take it with op
/// \"acquire\"") turned into the CLI commands that do the same.
fn in_cli_terms(why: &str) -> String {
    let name = limit_name(why).unwrap_or("NAME");
    why.replace("take it with op \"acquire\"", &format!("take it with `locker lease acquire --limit {name}`"))
        .replace("ask it with op \"go\"", &format!("ask it with `locker ask --limit {name}`"))
        .replace(
            "a heartbeat with its count restores it",
            "`locker lease heartbeat --limit NAME --lease ID --count N` restores it",
        )
}

/// The limit named in an error, written `limit "NAME"` by the locker.
fn limit_name(why: &str) -> Option<&str> {
    let start = why.find("limit \"")? + "limit \"".len();
    let len = why[start..].find('"')?;
    Some(&why[start..start + len])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pointers_to_ops_become_commands() {
        assert_eq!(
            in_cli_terms("limit \"db\" is a semaphore: take it with op \"acquire\""),
            "limit \"db\" is a semaphore: take it with `locker lease acquire --limit db`"
        );
        assert_eq!(
            in_cli_terms("limit \"api\" is not a semaphore: ask it with op \"go\""),
            "limit \"api\" is not a semaphore: ask it with `locker ask --limit api`"
        );
        assert_eq!(in_cli_terms("unknown limit \"x\""), "unknown limit \"x\"");
    }
}
