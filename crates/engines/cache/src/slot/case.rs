//! The seed's write cases (§5.2.2, Fig. 15), named as in the dissertation.

/// Which case a chunk write (or a read-miss load) went through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteCase {
    /// Both chunks free: load the home block into one, write, tag it C(1,1).
    Case1,
    /// My chunk valid, the other free: clear N on mine, copy it to the other, write, tag the
    /// copy C(1,1), invalidate mine.
    Case2_1,
    /// Another file's chunk valid, the other free: clear its N, load my home block into the
    /// free chunk, write, tag it C(1,1).
    Case2_2,
    /// Both valid, mine the older: flush the other file's (newer) chunk home, free it, Case 2-1.
    Case3_1,
    /// Both valid, mine the newer: flush the other file's (older) chunk home, free it, Case 2-1.
    Case3_2,
    /// Both valid, neither mine: flush the older home, free it, Case 2-2.
    Case3_3,
    /// The chunk already belongs to the open multi-chunk write: written in place.
    InPlace,
}

impl WriteCase {
    pub const ALL: [WriteCase; 7] = [
        WriteCase::Case1,
        WriteCase::Case2_1,
        WriteCase::Case2_2,
        WriteCase::Case3_1,
        WriteCase::Case3_2,
        WriteCase::Case3_3,
        WriteCase::InPlace,
    ];

    /// The counter name (`stats`).
    pub fn name(self) -> &'static str {
        match self {
            WriteCase::Case1 => "case_1",
            WriteCase::Case2_1 => "case_2_1",
            WriteCase::Case2_2 => "case_2_2",
            WriteCase::Case3_1 => "case_3_1",
            WriteCase::Case3_2 => "case_3_2",
            WriteCase::Case3_3 => "case_3_3",
            WriteCase::InPlace => "case_in_place",
        }
    }

    pub fn index(self) -> usize {
        self as usize
    }

    /// Whether the case starts by flushing a victim chunk home (a forced flush).
    pub fn forces_flush(self) -> bool {
        matches!(
            self,
            WriteCase::Case3_1 | WriteCase::Case3_2 | WriteCase::Case3_3
        )
    }
}
