// Mask classes: a partition of an automaton's states such that states in one class classify
// every token of up to `depth` bytes the same way (compiled_grammar.h), so one precomputed
// mask serves the whole class.
//
// It is Moore's partition refinement stopped after `depth` rounds: round 0 splits by what a
// walk sees without consuming (final, has byte edges, whether the rule is ever called); round
// k by the round k-1 classes of the byte and call targets. A call into a rule that can
// complete without a byte continues at its target at the same depth, so such targets are
// compared exactly (by state) rather than by class. A counted repetition like x{0,1000}
// collapses from a thousand states to about `depth` classes.
//
// Pure function, thread-safe.
#pragma once

#include <cstdint>
#include <vector>

#include "grammar/automaton.h"

namespace tarmac::grammar {

// Class index per state, classes numbered from 0 in order of first appearance.
std::vector<int32_t> MaskClasses(const Automaton& a, int32_t depth);

}  // namespace tarmac::grammar
