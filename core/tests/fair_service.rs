//! The fairness manager served on a Linux abstract Unix socket: two flows
//! (as two clients) walk through 002 Fig 4.4, a violation reaches the
//! unlocked flow, and bad clients are disconnected without harming others.

#![cfg(target_os = "linux")]

use opsel::fair::{Command, FairnessSpec, FlowReport, ManagerClient, ManagerService};
use std::io::{Read, Write};
use std::time::Duration;

/// Generous deadline so a loaded machine cannot fail the test; the test
/// asserts what arrives, never how fast.
const WAIT: Duration = Duration::from_secs(20);

fn next(c: &mut ManagerClient) -> Command {
    c.recv(WAIT)
        .unwrap()
        .expect("no command within the deadline")
}

#[test]
fn fig_4_4_over_a_unix_socket() {
    let name = format!("opsel-fair-test-{}", std::process::id());
    let svc =
        ManagerService::bind_abstract(&name, FairnessSpec::default(), Duration::from_millis(5))
            .unwrap();
    let mut c1 = ManagerClient::connect_abstract(&name, 1).unwrap();
    assert_eq!(next(&mut c1), Command::Unlock { state: vec![] });
    let mut c2 = ManagerClient::connect_abstract(&name, 2).unwrap();
    assert_eq!(
        c2.recv(Duration::from_millis(50)).unwrap(),
        None,
        "flow 2 waits its turn"
    );
    c1.report(FlowReport::Learnt).unwrap();
    assert_eq!(next(&mut c1), Command::Lock);
    c1.report(FlowReport::Locked {
        cca: "cubic".into(),
    })
    .unwrap();
    assert_eq!(
        next(&mut c2),
        Command::Unlock {
            state: vec!["cubic".into()]
        }
    );
    // Unfair rates: the evaluation thread runs Alg 4 and tells flow 2.
    c1.rate(9.0).unwrap();
    c2.rate(1.0).unwrap();
    assert_eq!(
        next(&mut c2),
        Command::Violation {
            state: vec!["cubic".into()]
        }
    );
    assert!(svc.stats().unwrap().violations >= 1);

    // A second flow 1 is refused; flow 1 itself is unaffected.
    let mut dup = ManagerClient::connect_abstract(&name, 1).unwrap();
    assert!(dup.recv(WAIT).unwrap_err().to_string().contains("closed"));

    // A client sending garbage is disconnected.
    {
        use std::os::linux::net::SocketAddrExt;
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let mut raw = std::os::unix::net::UnixStream::connect_addr(&addr).unwrap();
        raw.write_all(b"{\"msg\":\"register\",\"flow\":3}\nnot json\n")
            .unwrap();
        raw.set_read_timeout(Some(WAIT)).unwrap();
        let mut rest = Vec::new();
        raw.read_to_end(&mut rest).unwrap();
    }

    // Flow 2 leaves while unlocked: flow 1 gets the turn with an empty State.
    drop(c2);
    assert_eq!(next(&mut c1), Command::Unlock { state: vec![] });
    // Stopping the service closes the connections.
    drop(svc);
    assert!(c1.recv(WAIT).unwrap_err().to_string().contains("closed"));
    // Nothing listens any more.
    assert!(ManagerClient::connect_abstract(&name, 9)
        .unwrap_err()
        .to_string()
        .contains("connecting to the fairness manager"));
}

#[test]
fn bad_service_config() {
    let e =
        ManagerService::bind_abstract("opsel-fair-bad", FairnessSpec::default(), Duration::ZERO)
            .err()
            .unwrap();
    assert!(e.to_string().contains("interval must be > 0"), "{e}");
}
