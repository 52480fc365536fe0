package main

import (
	"context"
	"fmt"
	"io"

	"github.com/accordlab/accord/store"
)

func cmdMigrate(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if len(args) != 1 || (args[0] != "up" && args[0] != "status") {
		fmt.Fprintln(stderr, "usage: accord migrate up|status")
		return 2
	}
	cfg, err := loadConfig(getenv)
	if err != nil {
		fmt.Fprintln(stderr, "accord:", err)
		return 2
	}
	pool, err := store.Open(ctx, cfg.DatabaseURL, 2)
	if err != nil {
		fmt.Fprintf(stderr, "accord: %v (check DATABASE_URL=%s)\n", err, redactURL(cfg.DatabaseURL))
		return 1
	}
	defer pool.Close()
	if args[0] == "up" {
		applied, err := store.Migrate(ctx, pool)
		for _, m := range applied {
			fmt.Fprintln(stdout, "applied", m.Name)
		}
		if err != nil {
			fmt.Fprintln(stderr, "accord:", err)
			return 1
		}
		if len(applied) == 0 {
			fmt.Fprintln(stdout, "nothing to apply: the schema is current")
		}
		return 0
	}
	st, err := store.Status(ctx, pool)
	if err != nil {
		fmt.Fprintln(stderr, "accord:", err)
		return 1
	}
	for _, a := range st.Applied {
		fmt.Fprintf(stdout, "applied  %s  %s\n", a.AppliedAt.UTC().Format("2006-01-02 15:04:05"), a.Name)
	}
	for _, m := range st.Pending {
		fmt.Fprintf(stdout, "pending  %-19s  %s\n", "", m.Name)
	}
	if len(st.RiverPending) > 0 {
		fmt.Fprintf(stdout, "pending  River migrations %v\n", st.RiverPending)
	}
	if !st.Current() {
		return 3
	}
	return 0
}
