//! CRC-32C (Castagnoli) for the short records persistent structures seal themselves with
//! (a 64-byte log entry checksums 60 bytes). The `crc32c` crate is tuned for long buffers;
//! on a 60-byte one its alignment split and byte-wise tail cost ~250 instructions, against
//! eight `crc32` instructions here, and a log entry is sealed on every transaction's hot
//! path. Same polynomial, initial value and final inversion as `crc32c::crc32c`, so values
//! are interchangeable (tested against it).

/// The reflected Castagnoli polynomial.
const POLY: u32 = 0x82F6_3B78;

/// Byte-at-a-time table for CPUs without SSE 4.2.
const TABLE: [u32; 256] = {
    let mut table = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut crc = i as u32;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ POLY
            } else {
                crc >> 1
            };
            bit += 1;
        }
        table[i] = crc;
        i += 1;
    }
    table
};

/// CRC-32C of `data`.
pub fn crc32c(data: &[u8]) -> u32 {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("sse4.2") {
            // SAFETY: the CPU has SSE 4.2 (checked just above), which is all `hardware` needs.
            return unsafe { hardware(data) };
        }
    }
    software(data)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse4.2")]
unsafe fn hardware(data: &[u8]) -> u32 {
    use std::arch::x86_64::{_mm_crc32_u64, _mm_crc32_u8};
    let mut crc = u64::from(!0u32);
    let mut words = data.chunks_exact(8);
    for word in &mut words {
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(word);
        crc = _mm_crc32_u64(crc, u64::from_le_bytes(bytes));
    }
    let mut crc = crc as u32;
    for &byte in words.remainder() {
        crc = _mm_crc32_u8(crc, byte);
    }
    !crc
}

fn software(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &byte in data {
        crc = TABLE[((crc ^ u32::from(byte)) & 0xFF) as usize] ^ (crc >> 8);
    }
    !crc
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn known_values() {
        // The check value of CRC-32C ("123456789") and the empty input.
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
        assert_eq!(software(b"123456789"), 0xE306_9283);
        assert_eq!(crc32c(b""), 0);
    }

    proptest! {
        #[test]
        fn hardware_and_software_agree(data in proptest::collection::vec(any::<u8>(), 0..200)) {
            prop_assert_eq!(crc32c(&data), software(&data));
        }
    }
}
