//! NetFlow v5 / v9 / IPFIX decoding: round trips through the encoders,
//! hand-built datagrams for the parts the encoders do not produce, and clear
//! errors for malformed input.

use std::net::SocketAddr;

use opsel::flows::export::{
    encode_ipfix, encode_v5, encode_v9, DecodeSummary, Decoder, DecoderLimits,
};
use opsel::flows::FlowRecord;

const S: u64 = 1_000_000_000;
const T0: u64 = 1_700_000_000; // export time, s

fn exporter() -> SocketAddr {
    "127.0.0.1:9995".parse().unwrap()
}

fn rec(
    src: &str,
    dst: &str,
    sport: u16,
    bytes: u64,
    packets: u64,
    first_s: u64,
    last_s: u64,
) -> FlowRecord {
    FlowRecord {
        src_addr: src.parse().unwrap(),
        dst_addr: dst.parse().unwrap(),
        src_port: sport,
        dst_port: 2811,
        proto: 6,
        bytes,
        packets,
        first_ns: first_s * S,
        last_ns: last_s * S,
        sampling_interval: 1,
    }
}

fn decode_all(d: &mut Decoder, pkt: &[u8]) -> (Vec<FlowRecord>, DecodeSummary) {
    let mut out = Vec::new();
    let s = d.decode(exporter(), pkt, |r| out.push(*r)).unwrap();
    (out, s)
}

fn with_n(mut v: Vec<FlowRecord>, n: u32) -> Vec<FlowRecord> {
    for r in &mut v {
        r.sampling_interval = n;
    }
    v
}

#[test]
fn v5_round_trip_with_header_sampling() {
    let recs = vec![
        rec(
            "10.0.0.1",
            "10.1.0.1",
            40000,
            1_000_000,
            700,
            T0 - 60,
            T0 - 1,
        ),
        rec("10.0.0.2", "10.1.0.2", 22, 1_500, 3, T0 - 5, T0 - 5),
    ];
    let mut pkt = Vec::new();
    encode_v5(&recs, T0 * S, 3_600_000, 1000, 7, &mut pkt).unwrap();
    assert_eq!(pkt.len(), 24 + 2 * 48);
    // The mode bits (top 2) do not leak into the interval.
    pkt[22] |= 0x40;
    let (got, s) = decode_all(&mut Decoder::new(), &pkt);
    assert_eq!(s.version, 5);
    assert_eq!(s.records, 2);
    assert_eq!(got, with_n(recs, 1000));
}

#[test]
fn v5_unsampled_is_one_and_bad_counts_fail() {
    let recs = vec![rec("10.0.0.1", "10.1.0.1", 1, 10, 1, T0 - 2, T0 - 1)];
    let mut pkt = Vec::new();
    encode_v5(&recs, T0 * S, 10_000, 0, 0, &mut pkt).unwrap();
    let (got, _) = decode_all(&mut Decoder::new(), &pkt);
    assert_eq!(got[0].sampling_interval, 1);
    let mut d = Decoder::new();
    let e = d
        .decode(exporter(), &pkt[..pkt.len() - 1], |_| {})
        .unwrap_err()
        .to_string();
    assert!(e.contains("shorter than its 1 records"), "{e}");
    let mut zero = pkt.clone();
    zero[2..4].copy_from_slice(&0u16.to_be_bytes());
    assert!(d
        .decode(exporter(), &zero, |_| {})
        .unwrap_err()
        .to_string()
        .contains("1..=30"));
    let e = d
        .decode(exporter(), &[0, 7, 1, 2], |_| {})
        .unwrap_err()
        .to_string();
    assert!(e.contains("version 7"), "{e}");
}

#[test]
fn v9_templates_then_data_v4_and_v6_with_sampling_options() {
    let recs = vec![
        rec(
            "10.0.0.1",
            "10.1.0.1",
            40000,
            1_200_000,
            830,
            T0 - 60,
            T0 - 2,
        ),
        rec(
            "2001:db8::1",
            "2001:db8:1::9",
            40001,
            5_000,
            4,
            T0 - 30,
            T0 - 29,
        ),
    ];
    let mut d = Decoder::new();
    let mut pkt = Vec::new();
    // Data before any template: skipped and counted, not an error.
    encode_v9(&recs, T0 as u32, 5_000_000, 42, 1, false, None, &mut pkt).unwrap();
    let (got, s) = decode_all(&mut d, &pkt);
    assert!(got.is_empty());
    assert_eq!(s.sets_without_template, 2);
    // Templates + sampling options + data.
    encode_v9(
        &recs,
        T0 as u32,
        5_000_000,
        42,
        2,
        true,
        Some(1000),
        &mut pkt,
    )
    .unwrap();
    let (got, s) = decode_all(&mut d, &pkt);
    assert_eq!((s.templates, s.options_records, s.records), (3, 1, 2));
    assert_eq!(got, with_n(recs.clone(), 1000));
    // Later datagrams without templates reuse the learnt ones and sampling.
    encode_v9(
        &recs[..1],
        T0 as u32 + 60,
        5_060_000,
        42,
        3,
        false,
        None,
        &mut pkt,
    )
    .unwrap();
    let (got, _) = decode_all(&mut d, &pkt);
    assert_eq!(got, with_n(recs[..1].to_vec(), 1000));
    // Another source ID on the same exporter has its own templates.
    encode_v9(&recs, T0 as u32, 5_000_000, 43, 1, false, None, &mut pkt).unwrap();
    assert_eq!(decode_all(&mut d, &pkt).1.sets_without_template, 2);
}

#[test]
fn ipfix_templates_sampling_packet_interval_and_space() {
    let recs = vec![
        rec(
            "10.0.0.1",
            "10.1.0.1",
            40000,
            1_200_000,
            830,
            T0 - 60,
            T0 - 2,
        ),
        rec(
            "2001:db8::1",
            "2001:db8:1::9",
            40001,
            5_000,
            4,
            T0 - 30,
            T0 - 29,
        ),
    ];
    let mut d = Decoder::new();
    let mut pkt = Vec::new();
    encode_ipfix(&recs, T0 as u32, 7, 1, true, Some(100), &mut pkt).unwrap();
    let (got, s) = decode_all(&mut d, &pkt);
    assert_eq!(
        (s.version, s.templates, s.options_records, s.records),
        (10, 3, 1, 2)
    );
    assert_eq!(got, with_n(recs.clone(), 100));
    assert_eq!(d.template_count(), 3);
}

/// Hand-built IPFIX message: an enterprise field, a variable-length field,
/// NTP microsecond times, a per-record samplingProbability, a set padded to 4,
/// then a template withdrawal.
#[test]
fn ipfix_hand_built_enterprise_varlen_ntp_probability_withdrawal() {
    let mut m: Vec<u8> = vec![0, 10, 0, 0];
    m.extend_from_slice(&(T0 as u32).to_be_bytes());
    m.extend_from_slice(&9u32.to_be_bytes());
    m.extend_from_slice(&1u32.to_be_bytes());
    // Template set: template 300, 8 fields.
    let tset: Vec<u8> = [
        &[0u8, 2, 0, 0][..],
        &[1, 44, 0, 8],
        &[0, 8, 0, 4],        // sourceIPv4Address
        &[0, 12, 0, 4],       // destinationIPv4Address
        &[0x80, 1, 0, 2],     // enterprise 1 / IE 1 (ignored): 2 bytes
        &[0, 0, 0, 9],        // enterprise number 9
        &[0, 82, 0xff, 0xff], // interfaceName, variable length
        &[0, 1, 0, 4],        // octetDeltaCount, reduced to 4 bytes
        &[0, 2, 0, 2],        // packetDeltaCount, 2 bytes
        &[0, 154, 0, 8],      // flowStartMicroseconds (NTP)
        &[1, 55, 0, 8],       // samplingProbability (311), float64
    ]
    .concat();
    let mut tset = tset;
    let l = tset.len() as u16;
    tset[2..4].copy_from_slice(&l.to_be_bytes());
    m.extend_from_slice(&tset);
    // Data set 300: one record + 3 bytes of padding.
    let ntp_s = (T0 + 2_208_988_800 - 10) as u32;
    let mut data: Vec<u8> = vec![1, 44, 0, 0];
    data.extend_from_slice(&[192, 0, 2, 1, 198, 51, 100, 7]);
    data.extend_from_slice(&[0xAB, 0xCD]);
    data.extend_from_slice(&[3, b'e', b't', b'h']);
    data.extend_from_slice(&1_000_000u32.to_be_bytes());
    data.extend_from_slice(&700u16.to_be_bytes());
    data.extend_from_slice(&ntp_s.to_be_bytes());
    data.extend_from_slice(&(1u32 << 31).to_be_bytes()); // + 0.5 s
    data.extend_from_slice(&0.001f64.to_bits().to_be_bytes());
    data.extend_from_slice(&[0, 0, 0]);
    let l = data.len() as u16;
    data[2..4].copy_from_slice(&l.to_be_bytes());
    m.extend_from_slice(&data);
    // Withdrawal of template 300.
    m.extend_from_slice(&[0, 2, 0, 8, 1, 44, 0, 0]);
    let l = m.len() as u16;
    m[2..4].copy_from_slice(&l.to_be_bytes());

    let mut d = Decoder::new();
    let (got, s) = decode_all(&mut d, &m);
    assert_eq!((s.records, s.templates), (1, 2));
    let r = got[0];
    assert_eq!(r.src_addr.to_string(), "192.0.2.1");
    assert_eq!(r.dst_addr.to_string(), "198.51.100.7");
    assert_eq!(
        (r.bytes, r.packets, r.sampling_interval),
        (1_000_000, 700, 1000)
    );
    assert_eq!(r.first_ns, (T0 - 10) * S + 500_000_000);
    // No end time: the export time.
    assert_eq!(r.last_ns, T0 * S);
    assert_eq!(d.template_count(), 0);
}

#[test]
fn malformed_v9_and_ipfix_are_clear_errors() {
    let recs = vec![rec(
        "10.0.0.1",
        "10.1.0.1",
        40000,
        1_200,
        1,
        T0 - 60,
        T0 - 2,
    )];
    let mut v9 = Vec::new();
    encode_v9(&recs, T0 as u32, 5_000_000, 1, 1, true, None, &mut v9).unwrap();
    let mut ipfix = Vec::new();
    encode_ipfix(&recs, T0 as u32, 1, 1, true, None, &mut ipfix).unwrap();
    let err = |pkt: &[u8]| {
        Decoder::new()
            .decode(exporter(), pkt, |_| {})
            .unwrap_err()
            .to_string()
    };

    // Flowset longer than the datagram.
    let mut p = v9.clone();
    p[22..24].copy_from_slice(&4000u16.to_be_bytes());
    let e = err(&p);
    assert!(
        e.contains("NetFlow v9") && e.contains("declares length 4000"),
        "{e}"
    );
    // Truncated header.
    assert!(err(&v9[..10]).contains("truncated"), "{}", err(&v9[..10]));
    // IPFIX length field beyond the datagram.
    let mut p = ipfix.clone();
    p[2..4].copy_from_slice(&((ipfix.len() + 1) as u16).to_be_bytes());
    assert!(err(&p).contains("message length"));
    // Address field with the wrong length in a template.
    let mut p = ipfix.clone();
    p[16 + 4 + 4 + 2..16 + 4 + 4 + 4].copy_from_slice(&3u16.to_be_bytes());
    let e = err(&p);
    assert!(e.contains("field 8 has length 3"), "{e}");
    // Reserved template IDs.
    let mut p = ipfix.clone();
    p[20..22].copy_from_slice(&5u16.to_be_bytes());
    assert!(err(&p).contains("reserved"));
}

#[test]
fn template_table_is_bounded() {
    let mut d = Decoder::with_limits(DecoderLimits {
        max_templates: 1,
        ..DecoderLimits::default()
    });
    let mut p = Vec::new();
    // Two templates (IPv4 and IPv6) in one datagram: the second does not fit.
    encode_ipfix(&[], T0 as u32, 1, 1, true, None, &mut p).unwrap();
    let e = d.decode(exporter(), &p, |_| {}).unwrap_err().to_string();
    assert!(e.contains("template table is full"), "{e}");
}

/// v9 option scope types (1 system … 5 template) are not information
/// elements: a Cache scope (type 4, the number of IE protocolIdentifier) of
/// 4 bytes is valid and must not be checked as a 1-byte protocol field.
#[test]
fn v9_scope_types_are_not_flow_fields() {
    let recs = vec![rec(
        "10.0.0.1",
        "10.1.0.1",
        40000,
        1_200,
        1,
        T0 - 60,
        T0 - 2,
    )];
    let mut p = Vec::new();
    encode_v9(&recs, T0 as u32, 5_000_000, 1, 1, true, Some(100), &mut p).unwrap();
    // Header 20 + template flowset 84 = options flowset at 104; its first scope type at 114.
    assert_eq!(&p[104..106], &[0, 1]);
    assert_eq!(&p[114..116], &[0, 1]);
    p[114..116].copy_from_slice(&4u16.to_be_bytes());
    let (got, s) = decode_all(&mut Decoder::new(), &p);
    assert_eq!((s.options_records, got.len()), (1, 1));
    assert_eq!(got[0].sampling_interval, 100);
}

/// An IPFIX template with an end time only: the record is a point at that time
/// (not skipped as "ends before it starts").
#[test]
fn ipfix_end_time_only() {
    let mut m: Vec<u8> = vec![0, 10, 0, 0];
    m.extend_from_slice(&(T0 as u32).to_be_bytes());
    m.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 1]);
    // Template 256: src, dst, octetDeltaCount (4), packetDeltaCount (4), flowEndSeconds.
    m.extend_from_slice(&[
        0, 2, 0, 28, 1, 0, 0, 5, 0, 8, 0, 4, 0, 12, 0, 4, 0, 1, 0, 4, 0, 2, 0, 4, 0, 151, 0, 4,
    ]);
    m.extend_from_slice(&[
        1, 0, 0, 24, 10, 0, 0, 1, 10, 0, 0, 2, 0, 0, 5, 220, 0, 0, 0, 1,
    ]);
    m.extend_from_slice(&((T0 - 7) as u32).to_be_bytes());
    let l = m.len() as u16;
    m[2..4].copy_from_slice(&l.to_be_bytes());
    let (got, s) = decode_all(&mut Decoder::new(), &m);
    assert_eq!((s.records, s.records_skipped), (1, 0));
    assert_eq!(
        (got[0].first_ns, got[0].last_ns),
        ((T0 - 7) * S, (T0 - 7) * S)
    );
    assert_eq!(
        (got[0].bytes, got[0].packets, got[0].sampling_interval),
        (1500, 1, 1)
    );
}
