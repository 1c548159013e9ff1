//! The verdict equals what the traffic does: real socket-LB programs (a
//! Service VIP rewritten to a backend on loopback) and real connections from
//! each pod's containers, beside every coverage assertion.

use integration_tests::lb::{Traffic, load_socket_lb, probe};
use integration_tests::*;

#[test]
fn the_probe_sees_translation_only_where_the_programs_are_in_effect() {
    if !can_run(&[]) {
        return;
    }
    let t = TestCgroup::new("probe");
    let inside = t.mkdir("inside");
    let outside = t.mkdir("outside");
    assert_eq!(probe(&inside), Traffic::NONE, "nothing translates before the programs");
    let lb = load_socket_lb();
    let _attached: Vec<Attached> = lb.iter().map(|p| Attached::new(&inside, p, ALLOW_MULTI)).collect();
    assert_eq!(probe(&inside), Traffic::ALL);
    assert_eq!(probe(&outside), Traffic::NONE);
}
