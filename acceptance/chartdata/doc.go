// Package chartdata turns a run's measurements and raw records into the
// data its charts are drawn from: pooled statistics of every series,
// latency distributions, latency over the run, throughput and telemetry
// per second, candidate-against-baseline comparisons by the gate engine's
// own rules, and log histograms for comparing runs. It also holds the
// reductions that keep a series drawable (LTTB, min-max, the rolling
// percentile).
//
// It is pure: no database, no files, no HTML. It imports acceptance and
// acceptance/stats only. The ingest reads a run folder
// into its inputs and stores the documents it returns (store/charts.go
// keeps them as JSON by key); pages decode them (Decode) and web/charts
// draws them.
package chartdata
