//! The conformance suite against ModelStore, the reference model: proves the suite and the
//! model agree (a case that fails here is a wrong case or a wrong model).

conformance::conformance_tests!(conformance::ModelHarness);
