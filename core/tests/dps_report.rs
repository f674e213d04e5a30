//! Prints the simulated counterparts of 002 Fig 5.4, 5.5 and 5.8 as the
//! markdown tables of `docs/results/dps.md`. Ignored by default (it only
//! measures); run with
//! `cargo test -p opsel --test dps_report -- --ignored --nocapture`.
//! Deterministic: the same tables on every run.

use opsel::dps::sim::{fairness_run, learning_summary, utility_in_window, Coordination};

const PS: [f64; 3] = [1.0, 0.5, 0.25];

#[test]
#[ignore = "measurement: prints the tables of docs/results/dps.md"]
fn print_tables() {
    let runs = 1000;
    println!("### Learning (002 Fig 5.4), {runs} seeded runs per cell\n");
    println!("| set | p | learning time (s) | learning cycles | net utility |");
    println!("|---|---|---|---|---|");
    for set in [
        &["cubic", "vegas"][..],
        &["cubic", "vegas", "illinois", "bbr"][..],
        &["cubic", "reno"][..],
        &["cubic", "bbr", "reno"][..],
    ] {
        for p in PS {
            let s = learning_summary(set, p, runs, 0).unwrap();
            println!(
                "| {} | {p} | {:.1} | {:.2} | {:.2} |",
                set.join(", "),
                s.mean_learning_s,
                s.mean_cycles,
                s.mean_net_utility
            );
        }
    }
    println!("\n### Fixed window (002 Fig 5.5), {runs} seeded runs per cell\n");
    println!("| set | window (s) | p | satisfied periods | satisfied seconds |");
    println!("|---|---|---|---|---|");
    for (set, windows) in [
        (&["cubic", "vegas"][..], [80u64, 600]),
        (&["cubic", "vegas", "illinois", "bbr"][..], [160, 600]),
    ] {
        for w in windows {
            for p in PS {
                let (mut per, mut sec) = (0.0, 0.0);
                for seed in 0..runs {
                    let u = utility_in_window(set, p, w, seed).unwrap();
                    per += u.satisfied_periods as f64;
                    sec += u.satisfied_s as f64;
                }
                println!(
                    "| {} | {w} | {p} | {:.2} | {:.1} |",
                    set.join(", "),
                    per / runs as f64,
                    sec / runs as f64
                );
            }
        }
    }
    let reps = 10;
    println!(
        "\n### Fairness of two DPS flows (002 Fig 5.8), 1200 s, {reps} seeded runs per cell\n"
    );
    println!("| ΔRTT | set | no manager | manager, same sender | same sender: learnt / learning | managers, separate senders | violations (same sender, mean) |");
    println!("|---|---|---|---|---|---|---|");
    for drtt in [false, true] {
        for set in [
            &["cubic", "vegas"][..],
            &["cubic", "vegas", "illinois", "bbr"][..],
        ] {
            let mut cells = Vec::new();
            let (mut viol, mut learnt, mut learning) = (0.0, 0.0, 0.0);
            for c in [
                Coordination::None,
                Coordination::SameSender,
                Coordination::SeparateSenders,
            ] {
                let mut j = 0.0;
                for seed in 0..reps {
                    let r = fairness_run(set, c, drtt, 1200, seed).unwrap();
                    j += r.net_jain;
                    if c == Coordination::SameSender {
                        viol += r.violations as f64;
                        learnt += r.learnt_jain;
                        learning += r.learning_jain;
                    }
                }
                cells.push(j / reps as f64);
            }
            let n = reps as f64;
            println!(
                "| {} ms | {} | {:.3} | {:.3} | {:.3} / {:.3} | {:.3} | {:.1} |",
                if drtt { 100 } else { 0 },
                set.join(", "),
                cells[0],
                cells[1],
                learnt / n,
                learning / n,
                cells[2],
                viol / n
            );
        }
    }
}
