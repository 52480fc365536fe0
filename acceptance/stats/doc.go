// Package stats holds the statistics behind Accord's gates, with no I/O and
// no dependencies on the rest of Accord.
//
// Definitions used everywhere:
//
//   - Quantile: nearest rank (Hyndman–Fan type 1, the inverse of the
//     empirical distribution function). The q-quantile of n samples is the
//     order statistic X_(k) with k = ⌈q·n⌉ (k ≥ 1). It is always an observed
//     value, and it is the definition that exact order-statistic confidence
//     bounds are stated for. For histogram input, an order statistic is the
//     value of the bucket holding that rank.
//   - Confidence bounds on a quantile: exact, distribution-free, from the
//     binomial distribution of the number of samples below the true quantile
//     (see UpperBoundRank and LowerBoundRank).
//   - Bootstrap: two-stage over repetitions (draw repetitions with
//     replacement, then samples within each drawn repetition), with
//     percentile intervals. Quantile resamples are drawn as multinomial
//     counts over a log-bucketed histogram (bucket relative error ≤ 0.1 %),
//     descending a binary tree of buckets with conditional binomial draws, so
//     one resample of a million samples costs a few dozen binomial draws
//     instead of a million; see Side. A few repetitions understate how
//     much whole runs differ, so the gate engine also applies Student's t
//     (TInterval) to each repetition's own statistic and needs both to
//     agree.
//   - Shares of requests (error rate): exact binomial tests and
//     Clopper–Pearson bounds on the pooled count (ClopperPearson).
//   - Random numbers: math/rand/v2's PCG, seeded from a digest of the inputs,
//     so that every result can be reproduced bit for bit.
package stats
