package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/big"
	"strings"

	"github.com/accordlab/accord/handlers/auth"
	"github.com/accordlab/accord/store"
)

// cmdUser creates accounts from the command line; the first account of an
// installation is made this way, with --admin.
func cmdUser(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "create" {
		fmt.Fprintln(stderr, "usage: accord user create --email EMAIL --name NAME [--org NAME --org-kind vendor|customer] [--admin] [--password-stdin]")
		return 2
	}
	fs := flag.NewFlagSet("user create", flag.ContinueOnError)
	fs.SetOutput(stderr)
	email := fs.String("email", "", "the account's email (its sign-in name)")
	name := fs.String("name", "", "display name")
	org := fs.String("org", "", "organisation to put the user in (created if missing, with --org-kind)")
	orgKind := fs.String("org-kind", "", "vendor or customer, when --org must be created")
	admin := fs.Bool("admin", false, "make the account a site administrator")
	fromStdin := fs.Bool("password-stdin", false, "read the password from the first line of standard input (otherwise one is generated and printed)")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	if *email == "" || *name == "" {
		fmt.Fprintln(stderr, "accord: --email and --name are required")
		return 2
	}
	password := ""
	if *fromStdin {
		line, err := bufio.NewReader(stdin).ReadString('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			fmt.Fprintln(stderr, "accord: read password:", err)
			return 2
		}
		password = strings.TrimRight(line, "\r\n")
	} else {
		password = generatePassword()
	}
	hash, err := auth.HashPassword(password)
	if err != nil {
		fmt.Fprintln(stderr, "accord:", err)
		return 2
	}
	cfg, err := loadConfig(getenv)
	if err != nil {
		fmt.Fprintln(stderr, "accord:", err)
		return 2
	}
	pool, err := store.Open(ctx, cfg.DatabaseURL, 2)
	if err != nil {
		fmt.Fprintln(stderr, "accord:", err)
		return 1
	}
	defer pool.Close()
	if err := ensureMigrated(ctx, cfg, newLogger(cfg, stderr), pool); err != nil {
		fmt.Fprintln(stderr, "accord:", err)
		return 1
	}
	st := store.New(pool)
	err = st.InTx(ctx, func(tx *store.Store) error {
		var orgID *int64
		if *org != "" {
			id, err := tx.EnsureOrganization(ctx, *org, *orgKind)
			if errors.Is(err, store.ErrNoSuchOrganization) {
				err = fmt.Errorf("organisation %q does not exist: give --org-kind vendor or customer to create it", *org)
			}
			if err != nil {
				return err
			}
			orgID = &id
		}
		id, err := tx.CreateUser(ctx, store.NewUser{Email: *email, DisplayName: *name, PasswordHash: hash, OrganizationID: orgID, IsAdmin: *admin})
		if err != nil {
			return err
		}
		return tx.Audit(ctx, store.AuditEntry{ActorLabel: "accord user create", Action: "user_created", Target: fmt.Sprintf("user %d", id),
			Details: map[string]any{"email": *email, "admin": *admin}})
	})
	if errors.Is(err, store.ErrConflict) {
		fmt.Fprintf(stderr, "accord: an account with the email %s exists already\n", *email)
		return 1
	}
	if err != nil {
		fmt.Fprintln(stderr, "accord:", err)
		return 1
	}
	fmt.Fprintf(stdout, "created %s (%s)\n", *email, map[bool]string{true: "site administrator", false: "user"}[*admin])
	if !*fromStdin {
		fmt.Fprintf(stdout, "password: %s\n", password)
	}
	return 0
}

// generatePassword returns 20 characters from an unambiguous alphabet.
func generatePassword() string {
	const alphabet = "abcdefghijkmnpqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789"
	var b strings.Builder
	for range 20 {
		n, _ := rand.Int(rand.Reader, big.NewInt(int64(len(alphabet))))
		b.WriteByte(alphabet[n.Int64()])
	}
	return b.String()
}
