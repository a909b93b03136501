//! `locker ask` with several `--limit` (limits checked together, as one
//! `all`), `locker refund` (with `--parent`, to the limits above too),
//! `locker charge` (permits used, taken past the limit if need be) and
//! `locker reset`: each one request through
//! `Client`, printed for a person or as JSON.

use std::time::Duration;

use clap::Args;

use super::{exit_for, failure, ConnectArgs, EXIT_GO};
use crate::client::Client;
use crate::wire::{AllReply, Ask, Charge, GoReply, Parents, Refund};

/// One key of one limit, on the lockers asked.
#[derive(Debug, Args)]
pub(crate) struct KeyArgs {
    #[command(flatten)]
    connect: ConnectArgs,
    /// Limit of the key; the locker's default limit when absent.
    #[arg(long, value_name = "NAME")]
    limit: Option<String>,
    /// Key within the limit.
    #[arg(long, value_name = "KEY")]
    key: Option<String>,
}

#[derive(Debug, Args)]
pub(crate) struct RefundArgs {
    #[command(flatten)]
    of: KeyArgs,
    /// Permits to give back: at most what the key took and still counts.
    #[arg(long, value_name = "N", default_value_t = 1)]
    cost: u64,
    /// The key of a limit above --limit, as the ask named it (e.g. --parent team=t3); repeat for each: each gets the
    /// permits back too.
    #[arg(long = "parent", value_name = "LIMIT=KEY", value_parser = super::parse_parent)]
    parents: Vec<(String, String)>,
}

#[derive(Debug, Args)]
pub(crate) struct ChargeArgs {
    #[command(flatten)]
    of: KeyArgs,
    /// Permits used, to take whatever is left: what goes past the limit is a debt later asks wait out.
    #[arg(long, value_name = "N", default_value_t = 1)]
    cost: u64,
    /// The key of a limit above --limit (e.g. --parent team=t3); repeat for each: each is charged too.
    #[arg(long = "parent", value_name = "LIMIT=KEY", value_parser = super::parse_parent)]
    parents: Vec<(String, String)>,
}

/// Asks every part of `asks` together and, on a go with reservations,
/// sleeps until the last part may go; prints the reply and returns the
/// exit code: 0 when every part went, 1 when none was charged.
pub(crate) fn ask_all(client: &mut Client, asks: &[Ask], json: bool) -> u8 {
    let (max_wait_ms, hold_ms) = (asks[0].max_wait_ms, asks[0].hold_ms);
    let bare: Vec<Ask> = asks.iter().map(|a| Ask { max_wait_ms: None, hold_ms: None, ..*a }).collect();
    match client.all_within(&bare, max_wait_ms, hold_ms) {
        Ok(reply) => {
            let wait = reply.replies.iter().filter_map(|r| r.wait_ms).max().filter(|_| reply.ok).unwrap_or(0);
            std::thread::sleep(Duration::from_millis(wait));
            print_all(&reply, asks, json);
            exit_for(reply.ok)
        }
        Err(e) => failure::request_failed(&e, json),
    }
}

fn print_all(reply: &AllReply, asks: &[Ask], json: bool) {
    if json {
        println!("{}", serde_json::to_string(reply).expect("a reply is plain data"));
        return;
    }
    println!(
        "{}",
        if !reply.ok {
            "sorry"
        } else if reply.shadow_sorry {
            "go (shadow sorry)"
        } else {
            "go"
        }
    );
    for (ask, part) in asks.iter().zip(&reply.replies).filter(|(_, p)| !p.ok || p.shadow_sorry) {
        let (limit, said) = (ask.limit.unwrap_or("default"), if part.ok { "shadow sorry" } else { "sorry" });
        println!("  {limit}: {said}, {} left, retry after {} ms", part.remaining, part.retry_after_ms);
    }
}

pub(crate) fn refund(args: RefundArgs) -> u8 {
    let (of, json) = (&args.of, args.of.connect.json);
    let pairs = super::parent_pairs(&args.parents);
    let refund = Refund {
        limit: of.limit.as_deref(),
        key: of.key.as_deref(),
        cost: args.cost,
        parents: (!pairs.is_empty()).then(|| Parents::new(&pairs)),
    };
    let reply = of.connect.client().and_then(|mut c| c.give_back(&refund));
    print_done(reply, json, |r| format!("refunded {}, {} left", r.granted.unwrap_or(0), r.remaining))
}

pub(crate) fn charge(args: ChargeArgs) -> u8 {
    let (of, json) = (&args.of, args.of.connect.json);
    let pairs = super::parent_pairs(&args.parents);
    let charge = Charge {
        limit: of.limit.as_deref(),
        key: of.key.as_deref(),
        cost: args.cost,
        parents: (!pairs.is_empty()).then(|| Parents::new(&pairs)),
    };
    match of.connect.client().and_then(|mut c| c.charge_with(&charge)) {
        Ok(r) if json => {
            println!("{}", serde_json::to_string(&r).expect("a reply is plain data"));
            EXIT_GO
        }
        Ok(r) => {
            println!("charged {}, {} left, {} owed", r.granted, r.remaining, r.debt);
            EXIT_GO
        }
        Err(e) => failure::request_failed(&e, json),
    }
}

pub(crate) fn reset(args: KeyArgs) -> u8 {
    let json = args.connect.json;
    let reply = args.connect.client().and_then(|mut c| c.reset(args.limit.as_deref(), args.key.as_deref()));
    print_done(reply, json, |r| format!("reset, {} left", r.remaining))
}

fn print_done(reply: Result<GoReply, crate::client::ClientError>, json: bool, line: impl Fn(&GoReply) -> String) -> u8 {
    match reply {
        Ok(r) if json => {
            println!("{}", serde_json::to_string(&r).expect("a reply is plain data"));
            EXIT_GO
        }
        Ok(r) => {
            println!("{}", line(&r));
            EXIT_GO
        }
        Err(e) => failure::request_failed(&e, json),
    }
}
