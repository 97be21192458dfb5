//! H.264 and HEVC framing. MP4 and Matroska store NAL units with a length prefix and keep the
//! parameter sets (SPS, PPS, VPS) in a configuration record (`avcC`, `hvcC`); hardware
//! decoders' parsers (NVDEC's) want an Annex B byte stream: start codes, parameter sets in
//! band.

use crate::Codec;

const START: [u8; 4] = [0, 0, 0, 1];

/// What a configuration record says: the length prefix size and the parameter sets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Bytes of each NAL unit's length prefix (1, 2 or 4).
    pub length_size: usize,
    /// The parameter sets as an Annex B stream (each after a start code).
    pub annexb: Vec<u8>,
}

fn u16_at(b: &[u8], at: usize) -> Option<usize> {
    Some(u16::from_be_bytes([*b.get(at)?, *b.get(at + 1)?]) as usize)
}

/// Parse an `avcC` (H.264) or `hvcC` (HEVC) record. `None` when it is malformed.
pub fn parse_config(codec: &Codec, record: &[u8]) -> Option<Config> {
    let mut annexb = Vec::new();
    let mut push = |b: &[u8], at: &mut usize| -> Option<()> {
        let n = u16_at(b, *at)?;
        let nal = b.get(*at + 2..*at + 2 + n)?;
        annexb.extend_from_slice(&START);
        annexb.extend_from_slice(nal);
        *at += 2 + n;
        Some(())
    };
    let length_size = match codec {
        Codec::H264 => {
            let b = record;
            let length_size = (*b.get(4)? & 3) as usize + 1;
            let mut at = 5;
            let sps = (*b.get(at)? & 0x1f) as usize;
            at += 1;
            for _ in 0..sps {
                push(b, &mut at)?;
            }
            let pps = *b.get(at)? as usize;
            at += 1;
            for _ in 0..pps {
                push(b, &mut at)?;
            }
            length_size
        }
        Codec::Hevc => {
            let b = record;
            let length_size = (*b.get(21)? & 3) as usize + 1;
            let arrays = *b.get(22)? as usize;
            let mut at = 23;
            for _ in 0..arrays {
                at += 1; // array_completeness, NAL unit type
                let n = u16_at(b, at)?;
                at += 2;
                for _ in 0..n {
                    push(b, &mut at)?;
                }
            }
            length_size
        }
        _ => return None,
    };
    (length_size != 3).then_some(Config { length_size, annexb })
}

/// Append a length-prefixed sample to `out` as Annex B. `None` when a length runs past the
/// sample (a corrupt frame).
pub fn to_annexb(sample: &[u8], length_size: usize, out: &mut Vec<u8>) -> Option<()> {
    let mut at = 0;
    while at < sample.len() {
        let prefix = sample.get(at..at + length_size)?;
        let n = prefix.iter().fold(0usize, |acc, &b| (acc << 8) | b as usize);
        at += length_size;
        out.extend_from_slice(&START);
        out.extend_from_slice(sample.get(at..at + n)?);
        at += n;
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn avcc_gives_parameter_sets_and_samples_become_annexb() {
        // version 1, profile 100, compat 0, level 40, 4-byte lengths, 1 SPS, 1 PPS.
        let avcc = [1, 100, 0, 40, 0xff, 0xe1, 0, 3, 0x67, 1, 2, 1, 0, 2, 0x68, 9];
        let c = parse_config(&Codec::H264, &avcc).unwrap();
        assert_eq!(c.length_size, 4);
        assert_eq!(c.annexb, [0, 0, 0, 1, 0x67, 1, 2, 0, 0, 0, 1, 0x68, 9]);
        let mut out = Vec::new();
        to_annexb(&[0, 0, 0, 2, 0x65, 7, 0, 0, 0, 1, 0x06], 4, &mut out).unwrap();
        assert_eq!(out, [0, 0, 0, 1, 0x65, 7, 0, 0, 0, 1, 0x06]);
        // A length past the end is a corrupt sample, not a panic.
        assert!(to_annexb(&[0, 0, 0, 9, 0x65], 4, &mut Vec::new()).is_none());
        assert!(parse_config(&Codec::H264, &avcc[..10]).is_none());
    }

    #[test]
    fn hvcc_arrays_give_vps_sps_pps() {
        let mut hvcc = vec![0u8; 21];
        hvcc.push(0xf3); // 4-byte lengths
        hvcc.push(2); // two arrays
        hvcc.extend_from_slice(&[0x20, 0, 1, 0, 2, 0x40, 1]); // VPS
        hvcc.extend_from_slice(&[0x21, 0, 1, 0, 1, 0x42]); // SPS
        let c = parse_config(&Codec::Hevc, &hvcc).unwrap();
        assert_eq!(c.length_size, 4);
        assert_eq!(c.annexb, [0, 0, 0, 1, 0x40, 1, 0, 0, 0, 1, 0x42]);
    }
}
