package main

import (
	"context"
	"log/slog"
	"strings"
)

// routineRiverLog lowers River's routine INFO lines (a producer's job
// counts every few seconds, a maintenance service that "ran successfully")
// to DEBUG, so that they do not bury what people must read (the demo's
// sign-in lines, a run's failure) under a hundred lines of bookkeeping.
// Everything else River says keeps its level.
type routineRiverLog struct{ slog.Handler }

// routineRiverMessages end River's routine lines (its messages are
// "<service name>: <text>").
var routineRiverMessages = []string{": Producer job counts", ": Ran successfully"}

func (h routineRiverLog) Enabled(ctx context.Context, level slog.Level) bool {
	// An INFO line may become DEBUG: decide in Handle, where the message is known.
	return h.Handler.Enabled(ctx, level) || level == slog.LevelInfo && h.Handler.Enabled(ctx, slog.LevelDebug)
}

func (h routineRiverLog) Handle(ctx context.Context, r slog.Record) error {
	if r.Level == slog.LevelInfo && routineRiverLine(r.Message) {
		r.Level = slog.LevelDebug
	}
	if !h.Handler.Enabled(ctx, r.Level) {
		return nil
	}
	return h.Handler.Handle(ctx, r)
}

func (h routineRiverLog) WithAttrs(attrs []slog.Attr) slog.Handler {
	return routineRiverLog{h.Handler.WithAttrs(attrs)}
}

func (h routineRiverLog) WithGroup(name string) slog.Handler {
	return routineRiverLog{h.Handler.WithGroup(name)}
}

func routineRiverLine(msg string) bool {
	for _, suffix := range routineRiverMessages {
		if strings.HasSuffix(msg, suffix) {
			return true
		}
	}
	return false
}

// riverLogger is the logger River is given.
func riverLogger(log *slog.Logger) *slog.Logger {
	return slog.New(routineRiverLog{log.Handler()}).With("component", "river")
}
