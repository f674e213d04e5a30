//! Clocks. Schedules and achieved departure times are CLOCK_MONOTONIC ns;
//! kernel socket timestamps (SO_TIMESTAMPNS, SO_TIMESTAMPING software) are
//! CLOCK_REALTIME, so we convert with a measured offset.

fn now(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid out-pointer; the clocks used here always exist on Linux.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    timespec_ns(&ts)
}

/// Nanoseconds of a timespec (negative times clamp to 0).
pub fn timespec_ns(ts: &libc::timespec) -> u64 {
    (ts.tv_sec.max(0) as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec.max(0) as u64)
}

/// CLOCK_MONOTONIC in ns.
pub fn monotonic_ns() -> u64 {
    now(libc::CLOCK_MONOTONIC)
}

/// CLOCK_REALTIME in ns.
pub fn realtime_ns() -> u64 {
    now(libc::CLOCK_REALTIME)
}

/// `realtime - monotonic` in ns, measured as the midpoint of a
/// monotonic/realtime/monotonic read triple (the tightest of 5 tries), so a
/// kernel realtime stamp converts with `rt - offset`.
pub fn realtime_minus_monotonic_ns() -> i128 {
    let mut best: Option<(u64, i128)> = None;
    for _ in 0..5 {
        let a = monotonic_ns();
        let r = realtime_ns();
        let b = monotonic_ns();
        let width = b - a;
        let off = r as i128 - (a as i128 + (width / 2) as i128);
        if best.is_none_or(|(w, _)| width < w) {
            best = Some((width, off));
        }
    }
    best.map(|(_, o)| o).unwrap_or(0)
}

/// Sleep until the absolute CLOCK_MONOTONIC time `deadline_ns` (restarts on EINTR).
pub fn sleep_until_monotonic(deadline_ns: u64) {
    let ts = libc::timespec {
        tv_sec: (deadline_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (deadline_ns % 1_000_000_000) as libc::c_long,
    };
    loop {
        // SAFETY: valid timespec; null remainder is allowed with TIMER_ABSTIME.
        let rc = unsafe {
            libc::clock_nanosleep(
                libc::CLOCK_MONOTONIC,
                libc::TIMER_ABSTIME,
                &ts,
                std::ptr::null_mut(),
            )
        };
        if rc != libc::EINTR {
            break;
        }
    }
}
