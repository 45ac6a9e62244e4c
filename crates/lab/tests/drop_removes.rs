//! A Lab value removes its lab when dropped, also when the code using it
//! panics. Needs root.
use linerate_host::netns;
use linerate_lab::{Lab, LabSpec, UpOutcome};

#[test]
fn a_panicking_user_still_cleans_up() {
    let spec = LabSpec::new("lrt-drop");
    let names = spec.namespaces();
    let r = std::panic::catch_unwind(|| {
        let (lab, outcome) = Lab::up(&spec, false).unwrap();
        assert_eq!(outcome, UpOutcome::Built);
        assert!(names.all().iter().all(|n| netns::exists(n)));
        let _keep = lab;
        panic!("test body fails");
    });
    assert!(r.is_err());
    for n in names.all() {
        assert!(!netns::exists(n), "{n} left behind");
    }
    assert!(
        linerate_lab::find("lrt-drop").unwrap().is_none(),
        "record left behind"
    );
}

#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn persisted_labs_survive_the_value_and_come_down_by_name() {
    let spec = LabSpec::new("lrt-persist");
    let (lab, _) = Lab::up(&spec, false).unwrap();
    lab.persist();
    assert!(netns::exists("lrt-persist-dut"));
    // A second up returns the same lab, not owned: dropping it keeps the lab.
    let (again, outcome) = Lab::up(&spec, false).unwrap();
    assert_eq!(outcome, UpOutcome::AlreadyUp);
    drop(again);
    assert!(netns::exists("lrt-persist-dut"));
    let removed = linerate_lab::down("lrt-persist").unwrap();
    assert_eq!(removed.len(), 3);
    assert!(!netns::exists("lrt-persist-dut"));
}

#[test]
#[cfg_attr(
    not(feature = "privileged"),
    ignore = "needs root: --features privileged"
)]
fn a_stale_record_is_rebuilt() {
    let spec = LabSpec::new("lrt-stale");
    let (lab, _) = Lab::up(&spec, false).unwrap();
    lab.persist();
    // Someone removes a namespace by hand.
    linerate_host::cmd::ip(None, &["netns", "del", "lrt-stale-recv"]).unwrap();
    let (lab, outcome) = Lab::up(&spec, false).unwrap();
    assert_eq!(outcome, UpOutcome::Built);
    assert!(netns::exists("lrt-stale-recv"));
    lab.down().unwrap();
    assert!(!netns::exists("lrt-stale-gen"));
}
