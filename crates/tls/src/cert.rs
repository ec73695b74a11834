//! The self-signed certificate of `agent --tls`, written as DER by hand, and PEM in and out.
//!
//! Owns: a minimal DER encoder (only the types an X.509 v3 certificate needs), the
//! certificate's TBSCertificate and final assembly, the SHA-256 fingerprint text, and PEM
//! armour (writing, and reading the blocks of GOOSE_TLS_CERT_PATH / GOOSE_TLS_KEY_PATH).
//! Pure: no I/O, no clock, no randomness; key generation and signing are the caller's
//! (`tls::self_signed`, with ring). It does not parse certificates: rustls does that when
//! the server loads them.

use std::net::IpAddr;

/// DER tags used here.
mod tag {
    pub const BOOLEAN: u8 = 0x01;
    pub const INTEGER: u8 = 0x02;
    pub const BIT_STRING: u8 = 0x03;
    pub const OCTET_STRING: u8 = 0x04;
    pub const OID: u8 = 0x06;
    pub const UTF8_STRING: u8 = 0x0c;
    pub const UTC_TIME: u8 = 0x17;
    pub const GENERALIZED_TIME: u8 = 0x18;
    pub const SEQUENCE: u8 = 0x30;
    pub const SET: u8 = 0x31;
    /// `[n]` constructed, context-specific (EXPLICIT tagging).
    pub const fn explicit(n: u8) -> u8 {
        0xa0 | n
    }
    /// `[n]` primitive, context-specific (IMPLICIT tagging of a primitive type).
    pub const fn implicit(n: u8) -> u8 {
        0x80 | n
    }
}

/// Object identifiers, as arcs.
mod oid {
    pub const EC_PUBLIC_KEY: &[u64] = &[1, 2, 840, 10045, 2, 1];
    pub const PRIME256V1: &[u64] = &[1, 2, 840, 10045, 3, 1, 7];
    pub const ECDSA_WITH_SHA256: &[u64] = &[1, 2, 840, 10045, 4, 3, 2];
    pub const COMMON_NAME: &[u64] = &[2, 5, 4, 3];
    pub const SUBJECT_ALT_NAME: &[u64] = &[2, 5, 29, 17];
    pub const BASIC_CONSTRAINTS: &[u64] = &[2, 5, 29, 19];
    pub const KEY_USAGE: &[u64] = &[2, 5, 29, 15];
    pub const EXT_KEY_USAGE: &[u64] = &[2, 5, 29, 37];
    pub const SERVER_AUTH: &[u64] = &[1, 3, 6, 1, 5, 5, 7, 3, 1];
}

/// One TLV: tag, definite length (short or long form), content.
fn tlv(tag: u8, content: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(content.len() + 6);
    out.push(tag);
    let n = content.len();
    if n < 0x80 {
        out.push(n as u8);
    } else {
        let bytes = n.to_be_bytes();
        let first = bytes.iter().position(|&b| b != 0).unwrap_or(bytes.len() - 1);
        out.push(0x80 | (bytes.len() - first) as u8);
        out.extend_from_slice(&bytes[first..]);
    }
    out.extend_from_slice(content);
    out
}

fn constructed(tag: u8, parts: &[&[u8]]) -> Vec<u8> {
    tlv(tag, &parts.concat())
}

fn sequence(parts: &[&[u8]]) -> Vec<u8> {
    constructed(tag::SEQUENCE, parts)
}

fn oid(arcs: &[u64]) -> Vec<u8> {
    let mut body = Vec::new();
    let mut push = |mut v: u64| {
        let mut chunk = vec![(v & 0x7f) as u8];
        v >>= 7;
        while v > 0 {
            chunk.push(0x80 | (v & 0x7f) as u8);
            v >>= 7;
        }
        chunk.reverse();
        body.extend_from_slice(&chunk);
    };
    push(arcs[0] * 40 + arcs[1]);
    for &a in &arcs[2..] {
        push(a);
    }
    tlv(tag::OID, &body)
}

/// A non-negative INTEGER from big-endian magnitude bytes (minimal, sign byte if needed).
fn unsigned_integer(magnitude: &[u8]) -> Vec<u8> {
    let first = magnitude.iter().position(|&b| b != 0).unwrap_or(magnitude.len().saturating_sub(1));
    let m = if magnitude.is_empty() { &[0u8][..] } else { &magnitude[first..] };
    let mut body = Vec::with_capacity(m.len() + 1);
    if m[0] & 0x80 != 0 {
        body.push(0);
    }
    body.extend_from_slice(m);
    tlv(tag::INTEGER, &body)
}

/// A BIT STRING of whole bytes (no unused bits).
fn bit_string(bytes: &[u8]) -> Vec<u8> {
    tlv(tag::BIT_STRING, &[&[0u8][..], bytes].concat())
}

/// RFC 5280 4.1.2.5: UTCTime through 2049, GeneralizedTime from 2050, always in UTC (`Z`).
fn time(unix_secs: i64) -> Vec<u8> {
    // `YYYY-MM-DDTHH:MM:SSZ` → `YYYYMMDDHHMMSS`.
    let digits: String = gosling_util::rfc3339(unix_secs).chars().filter(char::is_ascii_digit).collect();
    let year: i64 = digits[..4].parse().unwrap_or(0);
    if (1950..2050).contains(&year) {
        tlv(tag::UTC_TIME, format!("{}Z", &digits[2..]).as_bytes())
    } else {
        tlv(tag::GENERALIZED_TIME, format!("{digits}Z").as_bytes())
    }
}

/// `CN=<cn>` as a Name.
fn name(cn: &str) -> Vec<u8> {
    let atv = sequence(&[&oid(oid::COMMON_NAME), &tlv(tag::UTF8_STRING, cn.as_bytes())]);
    sequence(&[&constructed(tag::SET, &[&atv])])
}

fn extension(id: &[u64], critical: bool, value: &[u8]) -> Vec<u8> {
    // `critical` defaults to FALSE and DER omits defaults.
    let critical = if critical { tlv(tag::BOOLEAN, &[0xff]) } else { Vec::new() };
    sequence(&[&oid(id), &critical, &tlv(tag::OCTET_STRING, value)])
}

fn ecdsa_with_sha256() -> Vec<u8> {
    // RFC 5758 3.2: the parameters field is absent.
    sequence(&[&oid(oid::ECDSA_WITH_SHA256)])
}

/// What goes into the certificate besides its fixed parts.
pub struct CertParams<'a> {
    /// Positive serial number, big-endian (RFC 5280: at most 20 bytes).
    pub serial: &'a [u8],
    /// Issuer and subject common name.
    pub common_name: &'a str,
    pub not_before: i64,
    pub not_after: i64,
    /// subjectAltName dNSName entries.
    pub dns_names: &'a [String],
    /// subjectAltName iPAddress entries.
    pub ips: &'a [IpAddr],
    /// The P-256 public key as an uncompressed point (65 bytes, `04 || X || Y`).
    pub public_key: &'a [u8],
}

/// The DER TBSCertificate (RFC 5280 4.1) of a self-signed ECDSA P-256 server certificate:
/// v3, signed with ecdsa-with-SHA256, issuer = subject = `CN=<common_name>`, with
/// subjectAltName, basicConstraints CA:false, keyUsage digitalSignature and extKeyUsage
/// serverAuth.
pub fn tbs_certificate(p: &CertParams<'_>) -> Vec<u8> {
    let version = constructed(tag::explicit(0), &[&unsigned_integer(&[2])]);
    let validity = sequence(&[&time(p.not_before), &time(p.not_after)]);
    let spki = sequence(&[&sequence(&[&oid(oid::EC_PUBLIC_KEY), &oid(oid::PRIME256V1)]), &bit_string(p.public_key)]);
    let mut alt_names = Vec::new();
    for dns in p.dns_names {
        alt_names.extend(tlv(tag::implicit(2), dns.as_bytes()));
    }
    for ip in p.ips {
        let octets = match ip {
            IpAddr::V4(v4) => v4.octets().to_vec(),
            IpAddr::V6(v6) => v6.octets().to_vec(),
        };
        alt_names.extend(tlv(tag::implicit(7), &octets));
    }
    // keyUsage is a named BIT STRING: digitalSignature is bit 0 (the top bit), so one byte
    // 0x80 with its 7 unused trailing bits declared.
    let key_usage = tlv(tag::BIT_STRING, &[7, 0x80]);
    let extensions = sequence(&[
        &extension(oid::SUBJECT_ALT_NAME, false, &tlv(tag::SEQUENCE, &alt_names)),
        // cA defaults to FALSE and DER omits defaults: an empty SEQUENCE.
        &extension(oid::BASIC_CONSTRAINTS, true, &sequence(&[])),
        &extension(oid::KEY_USAGE, true, &key_usage),
        &extension(oid::EXT_KEY_USAGE, false, &sequence(&[&oid(oid::SERVER_AUTH)])),
    ]);
    let name = name(p.common_name);
    sequence(&[
        &version,
        &unsigned_integer(p.serial),
        &ecdsa_with_sha256(),
        &name,
        &validity,
        &name,
        &spki,
        &constructed(tag::explicit(3), &[&extensions]),
    ])
}

/// The DER Certificate: the TBSCertificate, the algorithm, and `signature` (an
/// ECDSA-Sig-Value in DER, as ring's `ECDSA_P256_SHA256_ASN1_SIGNING` makes it) over `tbs`.
pub fn certificate(tbs: &[u8], signature: &[u8]) -> Vec<u8> {
    sequence(&[tbs, &ecdsa_with_sha256(), &bit_string(signature)])
}

/// What clients pin: SHA-256 of the DER certificate, upper-case hex pairs joined by `:`
/// (goosed's `GOOSED_CERT_FINGERPRINT` format).
pub fn fingerprint(der: &[u8]) -> String {
    gosling_util::sha256(der).iter().map(|b| format!("{b:02X}")).collect::<Vec<_>>().join(":")
}

/// PEM armour for `der` under `label` (RFC 7468: base64 lines of 64 characters).
pub fn pem(label: &str, der: &[u8]) -> String {
    let b64 = gosling_util::base64_encode(der, false);
    let mut out = format!("-----BEGIN {label}-----\n");
    for line in b64.as_bytes().chunks(64) {
        out.push_str(std::str::from_utf8(line).unwrap_or_default());
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tiny DER reader for the tests: one TLV → (tag, content, rest).
    fn read(der: &[u8]) -> (u8, &[u8], &[u8]) {
        let tag = der[0];
        let (len, head) = match der[1] {
            n if n < 0x80 => (n as usize, 2),
            n => {
                let k = (n & 0x7f) as usize;
                assert!((1..=4).contains(&k), "length of length {k}");
                assert_ne!(der[2], 0, "non-minimal long-form length");
                let len = der[2..2 + k].iter().fold(0usize, |a, &b| a << 8 | b as usize);
                assert!(len >= 0x80, "long form used for a short length");
                (len, 2 + k)
            }
        };
        assert!(der.len() >= head + len, "TLV overruns its container: need {} have {}", head + len, der.len());
        (tag, &der[head..head + len], &der[head + len..])
    }

    /// The children of a constructed value, each as (tag, content); checks they fill it exactly.
    fn children(content: &[u8]) -> Vec<(u8, &[u8])> {
        let mut out = Vec::new();
        let mut rest = content;
        while !rest.is_empty() {
            let (t, c, r) = read(rest);
            out.push((t, c));
            rest = r;
        }
        out
    }

    fn params<'a>(dns: &'a [String], ips: &'a [IpAddr], key: &'a [u8]) -> CertParams<'a> {
        CertParams {
            serial: &[0x81, 2, 3],
            common_name: "gosling",
            not_before: 1_735_689_600, // 2025-01-01T00:00:00Z
            not_after: 2_556_144_000,  // 2051-01-01T00:00:00Z
            dns_names: dns,
            ips,
            public_key: key,
        }
    }

    #[test]
    fn lengths_and_primitives() {
        assert_eq!(tlv(4, &[]), [4, 0]);
        assert_eq!(tlv(4, &[9; 127])[..2], [4, 127]);
        assert_eq!(tlv(4, &[9; 128])[..3], [4, 0x81, 128]);
        assert_eq!(tlv(4, &[9; 300])[..4], [4, 0x82, 1, 44]);
        assert_eq!(tlv(4, &[9; 70_000])[..5], [4, 0x83, 1, 0x11, 0x70]);
        assert_eq!(oid(oid::ECDSA_WITH_SHA256), [6, 8, 0x2a, 0x86, 0x48, 0xce, 0x3d, 4, 3, 2]);
        assert_eq!(oid(oid::SUBJECT_ALT_NAME), [6, 3, 0x55, 0x1d, 0x11]);
        assert_eq!(unsigned_integer(&[0, 0, 5]), [2, 1, 5]);
        assert_eq!(unsigned_integer(&[0x80]), [2, 2, 0, 0x80]);
        assert_eq!(unsigned_integer(&[0]), [2, 1, 0]);
        assert_eq!(time(1_735_689_600), b"\x17\x0d250101000000Z");
        assert_eq!(time(2_556_144_000), b"\x18\x0f20510101000000Z");
        assert_eq!(time(2_524_607_999), b"\x17\x0d491231235959Z");
    }

    #[test]
    fn certificate_structure_round_trips() {
        let dns = vec!["localhost".to_string()];
        let ips = vec![IpAddr::from([127, 0, 0, 1]), "::1".parse().unwrap()];
        let key = [&[4u8][..], &[7u8; 64]].concat();
        let tbs = tbs_certificate(&params(&dns, &ips, &key));
        let cert = certificate(&tbs, &[0x30, 3, 2, 1, 1]);

        let (t, body, rest) = read(&cert);
        assert_eq!((t, rest.len()), (tag::SEQUENCE, 0));
        let top = children(body);
        assert_eq!(top.iter().map(|c| c.0).collect::<Vec<_>>(), [tag::SEQUENCE, tag::SEQUENCE, tag::BIT_STRING]);
        assert_eq!(read(&tbs).1, top[0].1, "the signed bytes are the TBSCertificate as embedded");
        assert_eq!(top[2].1, [0, 0x30, 3, 2, 1, 1]);

        let f = children(top[0].1);
        let tags: Vec<u8> = f.iter().map(|c| c.0).collect();
        assert_eq!(
            tags,
            [0xa0, tag::INTEGER, tag::SEQUENCE, tag::SEQUENCE, tag::SEQUENCE, tag::SEQUENCE, tag::SEQUENCE, 0xa3]
        );
        assert_eq!(f[0].1, [2, 1, 2], "version v3");
        assert_eq!(f[1].1, [0, 0x81, 2, 3], "serial kept positive");
        assert_eq!(f[2].1, top[1].1, "inner and outer algorithms agree");
        assert_eq!(f[3].1, f[5].1, "self-issued: issuer = subject");
        let cn = children(children(children(f[3].1)[0].1)[0].1);
        assert_eq!(cn[1], (tag::UTF8_STRING, &b"gosling"[..]));
        let validity = children(f[4].1);
        assert_eq!(
            validity,
            [(tag::UTC_TIME, &b"250101000000Z"[..]), (tag::GENERALIZED_TIME, &b"20510101000000Z"[..])]
        );
        let spki = children(f[6].1);
        assert_eq!(
            children(spki[0].1),
            [
                (tag::OID, &[0x2a, 0x86, 0x48, 0xce, 0x3d, 2, 1][..]),
                (tag::OID, &[0x2a, 0x86, 0x48, 0xce, 0x3d, 3, 1, 7][..])
            ]
        );
        assert_eq!(spki[1].1.len(), 66);

        let exts = children(children(f[7].1)[0].1);
        assert_eq!(exts.len(), 4);
        let san = children(exts[0].1);
        assert_eq!(san[0].1, [0x55, 0x1d, 0x11]);
        let names = children(read(san[1].1).1);
        assert_eq!(names[0], (0x82, &b"localhost"[..]));
        assert_eq!(names[1], (0x87, &[127, 0, 0, 1][..]));
        assert_eq!(names[2].1.len(), 16);
        let bc = children(exts[1].1);
        assert_eq!((bc[1].0, bc[1].1), (tag::BOOLEAN, &[0xff][..]), "basicConstraints is critical");
        assert_eq!(bc[2].1, [0x30, 0], "cA false, the default, omitted");
        assert_eq!(children(exts[2].1)[2].1, [3, 2, 7, 0x80], "keyUsage digitalSignature");
        assert_eq!(children(exts[3].1)[1].1, [0x30, 10, 6, 8, 0x2b, 6, 1, 5, 5, 7, 3, 1], "extKeyUsage serverAuth");
    }

    #[test]
    fn fingerprint_format() {
        assert_eq!(
            fingerprint(b"abc"),
            "BA:78:16:BF:8F:01:CF:EA:41:41:40:DE:5D:AE:22:23:B0:03:61:A3:96:17:7A:9C:B4:10:FF:61:F2:00:15:AD"
        );
    }

    #[test]
    fn pem_armour_reads_back_with_rustls() {
        use rustls::pki_types::pem::{PemObject, SectionKind};
        for n in [1usize, 2, 3, 47, 48, 49, 200] {
            let der: Vec<u8> = (0..n).map(|i| (i * 37 % 256) as u8).collect();
            let text = pem("CERTIFICATE", &der);
            assert!(text.lines().all(|l| l.len() <= 64));
            let got: Vec<(SectionKind, Vec<u8>)> =
                PemObject::pem_slice_iter(text.as_bytes()).collect::<Result<_, _>>().unwrap();
            assert_eq!(got, [(SectionKind::Certificate, der)]);
        }
        assert_eq!(pem("X", b"hello"), "-----BEGIN X-----\naGVsbG8=\n-----END X-----\n");
    }
}
