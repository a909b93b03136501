//! The integration tests, in one binary.
//!
//! Behaviour is tested deterministically on the pure seam: a
//! `locker::service::Service` answering request bytes at a given instant
//! (through `support::seam`, the one call of `service::step::request` for
//! a caller that waits), or a
//! `locker::sim::Group` of peered services on a simulated clock (offsets,
//! link delay, loss and reordering, kill, restart, pause). Replies, each
//! kind's counting, batches, holding, leases, restores, peering, clocks
//! and edge-case inputs live there, with exact figures.
//!
//! What needs real sockets but no process boundary runs against a locker
//! served in this process (`support::Served`, mini-redis style: the same
//! `Server` the binary runs, on a thread, stopped by a flag): the client
//! library's failover and timeouts (`failover::*`,
//! `edges::a_dead_first_endpoint_does_not_cost_half_the_timeout`,
//! `batch::the_client_asks_many_in_one_round_trip`,
//! `pool::a_permit_pool_hands_out_batches_but_never_more_than_a_slot_allows`,
//! `kinds::the_client_sleeps_a_reservation_and_its_lease_guard_holds_until_dropped`),
//! hostile messages on the socket (`hostile::empty_multipart_and_random_messages_never_stop_the_daemon`,
//! `hostile::oversized_messages_and_raw_garbage_only_hurt_their_sender`),
//! a held ask answered when the locker's injected clock reaches the next
//! slot (`hold::a_served_locker_on_a_clock_the_test_sets_answers_a_held_ask_when_that_clock_reaches_the_next_slot`),
//! the client's lease wait woken by a release
//! (`held_leases::the_clients_lease_waits_on_the_held_reply_and_wakes_at_the_release`),
//! and every reply reaching a DEALER client
//! (`delivery::a_held_burst_released_at_a_slot_start_reaches_its_caller_and_no_go_is_lost`,
//! `delivery::replies_to_a_client_that_went_away_are_counted_as_undelivered`,
//! `delivery::a_go_that_could_not_be_delivered_is_given_back`).
//!
//! ## What still starts a real `locker` process, and why
//!
//! Only what needs a process, a real socket, a real disk or another
//! program. By reason:
//!
//! - **Signals** (SIGTERM, SIGINT, SIGHUP, SIGSTOP):
//!   `lifecycle::sigterm_and_sigint_stop_it_within_a_second_with_status_zero`,
//!   `hold::sigterm_answers_every_held_ask_before_the_locker_exits`,
//!   `held_leases::sigterm_answers_every_waiting_acquire_before_the_locker_exits`,
//!   `delivery::a_dealer_with_six_thousand_held_asks_gets_every_reply_at_a_stop`,
//!   `state::sigterm_syncs_and_a_clean_restart_restores_too`,
//!   `operations::sighup_reloads_the_file_keeping_the_counts_of_unchanged_limits`,
//!   `operations::sighup_without_a_config_file_keeps_serving`,
//!   `state::a_reload_rewrites_the_state_file_for_the_new_limits` (SIGHUP),
//!   `peer_attacks::a_peer_frozen_under_load_stays_within_the_bound_and_warns_of_no_skew` (SIGSTOP under load),
//!   `edges::a_peer_that_goes_silent_and_comes_back_is_logged` (SIGSTOP, the log).
//! - **The state file on a real disk across kill -9**: `state::a_locker_killed_mid_slot_regrants_nothing_of_it`,
//!   `state::a_truncated_state_file_restores_its_good_prefix_and_says_so`,
//!   `state::a_corrupted_record_is_stepped_over_and_the_records_after_it_restored`,
//!   `state::a_file_for_other_limits_is_refused_unless_discarded`,
//!   `state::the_state_file_stays_bounded_under_a_flood_of_new_keys`,
//!   `hold::a_held_ask_that_goes_is_in_the_state_file_before_its_reply_leaves`,
//!   `clocks::a_restart_with_the_clock_stepped_ahead_regrants_nothing_and_the_next_one_runs_on_the_right_clock`,
//!   `clocks::a_restart_4_s_ahead_grants_nothing_where_the_slot_went_and_the_next_real_slot_serves_in_full` and
//!   `clocks::a_restart_4_s_behind_grants_nothing_where_the_slot_went_and_the_next_real_slot_serves_in_full` (libfaketime),
//!   `faults::a_full_disk_refuses_grants_instead_of_killing_the_locker`.
//! - **A restart's command line, with no node id** (the default id of a real process):
//!   `identity::*` (5).
//! - **The process's sockets** (its open-files limit, the endpoint it prints):
//!   `faults::the_soft_open_files_limit_is_raised_to_the_hard_one`,
//!   `faults::connections_it_cannot_accept_are_refused_once_each_counted_and_served_later`,
//!   `lifecycle::prints_the_real_endpoint_and_serves_it`,
//!   `edges::host_names_in_binds_are_resolved_and_ports_are_checked`.
//! - **The process's own resources** (resident memory, request latency, its entropy):
//!   `trust::a_flood_of_keys_gives_its_memory_back_at_the_next_slot_change_without_a_request`,
//!   `trust::a_flood_of_rolling_window_keys_gives_its_memory_back_without_a_request`,
//!   `peer_attacks::a_node_id_flood_leaves_memory_request_cost_and_shutdown_bounded`,
//!   `trust::lease_ids_derived_from_ones_own_touch_no_one_elses_lease` (the daemon's OS entropy).
//! - **CURVE**: `curve::*` (7).
//! - **The seed's Python client, and real scheduling delays**: `seed::the_seed_client_gets_go_and_sorry_and_never_more_than_max_per_slot`,
//!   `hold::the_seeds_client_unchanged_gets_go_for_every_ask_with_a_hold_of_800_ms`,
//!   `seed_scenario::the_seeds_limit_as_a_rolling_window_with_a_margin_never_has_a_call_refused_by_the_resource`.
//! - **Four real lockers that list different members** (their log, stats, `/health` and scrape under load):
//!   `peering_members::a_locker_listing_the_old_trio_among_four_real_lockers_is_refused_and_reported`.
//! - **The metrics endpoint and Prometheus**: `operations::a_scrape_counts_asks_per_limit_and_health_is_200`,
//!   `operations::a_peered_pair_shows_each_other_in_its_scrape`, `operations::a_locker_waiting_for_its_peers_is_503_joining`,
//!   `operations::locker_health_exits_0_while_serving_and_1_when_nothing_answers`, `prometheus::*` (3).
//! - **The Redis store**: `store::*` (12).
//! - **The command line** (`ask`, `refund`, `reset`, `stats`, `lease`, `bench`, `check-config`, config and flag
//!   errors, start-up warnings; `batch::bench_counts_every_decision_of_every_batch` asks a locker served in-process):
//!   `ask::*` (6), `bench::*` (3), `batch::bench_counts_every_decision_of_every_batch`,
//!   `runtime::a_real_locker_counts_a_limit_sent_with_terms_as_its_configured_twin_and_refuses_it_without_the_flag`,
//!   `together::a_real_locker_answers_all_refund_and_reset_from_the_command_line`,
//!   `together::peered_lockers_charge_a_refused_whole_to_no_part` (a peered pair, through the client),
//!   `parents::a_real_locker_asks_and_refunds_under_parents_and_refuses_a_cycle_with_its_line` (with a SIGHUP),
//!   `shadow::a_real_locker_asks_in_shadow_counts_it_in_stats_and_metrics_and_a_reload_ends_the_shadow` (a SIGHUP),
//!   `operations::check_config_exits_0_for_a_valid_file_and_2_with_the_error`,
//!   `edges::a_lease_wait_that_ends_in_the_queue_is_not_held_rather_than_an_error`,
//!   `edges::toml_errors_say_the_line_and_column_and_which_limit`, `edges::negative_numbers_reach_the_validation_message`,
//!   `edges::a_node_id_without_peer_bind_is_warned_about`, `edges::a_state_fsync_without_a_state_file_is_warned_about`,
//!   `edges::cli_errors_name_the_cli_command_and_json_gets_an_error_object`,
//!   `edges::serving_beyond_loopback_without_curve_is_warned_about`,
//!   `trust::a_locker_warns_at_start_when_it_serves_a_semaphore_without_a_lease_secret`.
//! - **The README's commands**: `readme::*` (2); every command of the docs, run against the documented locker:
//!   `doc_commands::*` (3); the one-host recipes, each started and checked: `one_host::*` (4); the Docker files'
//!   config and HEALTHCHECK against a real locker: `docker_files::*` (3).
//!
//! Real-process tests never sleep to wait for an event they can observe
//! (they wait for the endpoint line, a log line, a stats field), and assert
//! no figure tighter than the docs' stated bound.

#[allow(dead_code)] // each test module uses a different part of the harness
mod support;

/// `locker ask` and `locker stats` from the command line: output and exit codes.
mod ask;
/// Batched asks on the seam: each entry as the same ask alone; `ask_many` and `bench --batch` on a real locker.
mod batch;
/// `locker bench` against a real locker: its counts add up.
mod bench;
/// Calendar windows (a day, week or month of a time zone) on the seam, peered on a simulated clock, and restarted with a state file.
mod calendar;
/// Permits charged after the fact: the debt each kind carries and the asks that wait it out; peered, a debt of the
/// charging locker's share; `locker charge`.
mod charge;
/// Wall clocks stepped across a restart, under libfaketime.
mod clocks;
/// What stats count and what an ask may ask, on the seam: peeks apart from go, the hold's bound, refused peer messages.
mod counting;
/// CURVE: allowlisted clients get answers, unknown keys and plain clients none; keygen; config;
/// peers with their own keys, and no counts for an unlisted subscriber; only admin keys may reset.
mod curve;
/// Every reply arrives or is counted: a DEALER with thousands of held asks, a held burst, a client gone (its go
/// given back).
mod delivery;
/// Every shell command of README.md and docs/*.md, run as written or listed with why not.
mod doc_commands;
/// The Dockerfile and compose file: what they copy and mount exists, the image's config checks, the HEALTHCHECK answers.
mod docker_files;
/// Rough edges a new user hits: lease waits, config and flag errors, binds, CLI errors, peer logs, dead endpoints.
mod edges;
/// Extreme numbers: a limit is refused when built, or every kind holds its bound.
mod extremes;
/// `locker::Client` and `locker ask` failing over between lockers, dead or silent.
mod failover;
/// Faults on a real process: a full disk under the state file, no open files to spare.
mod faults;
/// Golden bytes of every message: both request forms, the replies, the peer messages.
mod golden;
/// Peered lockers on a simulated clock: the seed's scenario (through a kill and restart), skewed clocks, late and lost counts.
mod group;
/// Leases that wait: a held acquire granted at a release, an expiry, a reload; FIFO, bounded, answered at a stop.
mod held_leases;
/// Holding an ask for a go instead of sorry: seam and sim; real processes for the seed client, SIGTERM and the state file.
mod hold;
/// Hostile input: malformed requests on the seam; empty, multi-part, oversized and random messages on a socket.
mod hostile;
/// A peered locker killed with -9 and restarted with the same command line and no `--node-id`: its default id
/// stays, and no slot, window or span of the group goes over (#52); no stable id refuses; the state file keeps one.
mod identity;
/// What the state log keeps, on the seam: each kind's records replayed into a restarted service, alone and peered.
mod kept;
/// The kinds of limits on the seam: a token-bucket and fixed-window reservation, a lease
/// that expires on its deadline, a lease restored after a restart; the client's sleep and lease guard.
mod kinds;
/// The crate's floor plan: no module imports a module that imports it back.
mod layout;
/// The daemon's lifecycle: the endpoint line, and a clean stop on signals.
mod lifecycle;
/// Names that explain themselves: no two types in the crate share a name.
mod names;
/// The recipes of examples/one-host/: peering, CURVE, a lease secret and the store, each run as written.
mod one_host;
/// Operating it: Prometheus scrapes (alone and peered), health, reload on SIGHUP, check-config, JSON logs.
mod operations;
/// Limits under parents (org > team > user): every level or none, on the seam, peered on a simulated clock, and a
/// real locker's `--parent`, `check-config` and SIGHUP.
mod parents;
/// The peer link under attack on real processes: a node-id flood, a frozen peer.
mod peer_attacks;
/// Peering on the seam: services wired by hand through a network the test controls.
mod peer_protocol;
/// Peered lockers on a simulated clock: a shared count, exactly max per slot, restarts, lone survivors, stats.
mod peering;
/// Peered lockers sharing a token bucket on a simulated clock: the stated bound under saturation, a whole burst on one locker.
mod peering_bucket;
/// What exactness costs peered lockers in capacity, on a simulated clock: spare permits reach the demand, a pair's
/// witness, one busy locker's share of the limit.
mod peering_capacity;
/// Issue 37 as a user runs it: the seed's limit on three real lockers whose
/// peer links all pass through a proxy that delays them 40 to 70 ms.
mod peering_delayed;
/// A member that comes back gets its share back from its heir, on a simulated clock, and a second failure is
/// reclaimed: never over max.
mod peering_handback;
/// Peered fixed windows restarted with their state file, on a simulated clock: the share of the slot resumes, never over max.
mod peering_kept;
/// Peered token buckets restarted with their state file, on a simulated clock: the share resumes, never over burst + rate x T.
mod peering_kept_bucket;
/// Peered rolling windows restarted with their state file, on a simulated clock: their rights resume, never over max.
mod peering_kept_rolling;
/// A group of ten on a simulated clock, past the runs a peer may name at once: a restart within a slot owns none of it.
mod peering_large;
/// Peered lockers that list different members: nothing granted from shares until the sets agree, never over max.
mod peering_members;
/// A peered rolling window whose locker restarts more than two windows after lending its rights: never over max.
mod peering_memory;
/// Adding and removing a member on real lockers by the documented steps (configs, SIGHUP) under load: never over max.
mod peering_reload;
/// Real peered lockers with state files: a pair and a trio restarted with -9 serve their whole slot, and spare
/// permits reach the demand.
mod peering_restarts;
/// Peered lockers splitting each slot by demand, on a simulated clock: a bursty
/// or fast caller on one locker gets its whole quota, and load that moves adapts within a slot.
mod peering_split;
/// A peered group restarted all together without `--state`: no slot, window or span granted twice.
mod peering_together;
/// `PermitPool`: batches of permits taken with `up_to`, within the limit.
mod pool;
/// The scrape as promtool and a real Prometheus server read it.
mod prometheus;
/// The core's properties under generated asks and messages, in one home.
mod properties;
/// The request path on the seam (`service::step::request`), bytes in and out, for each kind.
mod protocol;
/// The README's command table and quick start, run as written.
mod readme;
/// Envoy's rate-limit service's settings: its rules' limits, rls_bind with rls_config (the gRPC API: tests/rls).
mod rls;
/// Rolling windows on the seam and a simulated clock, alone and peered: never more than max in any interval of length T.
mod rolling;
/// Limits sent with the ask (`terms`, `--runtime-limits`): created, bounded, retuned, dropped; `locker ask --terms`.
mod runtime;
/// The seed's own Python client, unchanged.
mod seed;
/// The seed's limit as a rolling window with a margin on three real lockers: the resource refuses nothing.
mod seed_scenario;
/// Dry runs (`shadow`): would-be sorries answered go, counted, charged nothing; on the seam, in an `all`, under
/// parents, peered on a simulated clock, on a store; a real locker's `--shadow`, stats, metrics and SIGHUP.
mod shadow;
/// `--state` on a real disk: a kill -9 mid-slot, damaged files, compaction, SIGTERM, reload.
mod state;
/// Counts in a real Redis and Redis Cluster.
mod store;
/// A monthly quota in a time zone on a real Redis, counted once by two lockers.
mod store_calendar;
/// Charges on a real Redis: each kind's debt in the store, waited out by every locker.
mod store_charge;
/// Limits under parents on a real Redis: an org's limit held across users and lockers.
mod store_parents;
/// A locker on a store, on the service seam: claims, the failure policy, lease calls.
mod store_seam;
/// Structured requests and named limits from a config file's text, on the seam: keys, errors, counters.
mod structured;
/// Limits checked together, refunds and resets: every op on the seam; a real locker alone and a peered pair.
mod together;
/// Attacks by clients: guessed lease ids, made-up restores (seam), key floods.
mod trust;
