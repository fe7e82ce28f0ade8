package main

import (
	"context"
	"database/sql"
	"flag"
	"log"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	gc "gc.stream.space/client"
)

func main() {
	flags := flag.NewFlagSet("streamspace", flag.ExitOnError)
	gcURL := flags.String("gc-url", "", "gc's request API (https://HOST:PORT)")
	tokenFile := flags.String("token-file", "/var/run/secrets/gc/token", "the projected ServiceAccount token for gc's audience")
	caBundle := flags.String("ca-bundle", "", "the CA bundle gc's certificate chains to (PEM)")
	namespace := flags.String("namespace", "streamspace", "the namespace of the sessions' objects")
	// StreamSpace's reconciler writes terminated and failed; deleted is its soft delete.
	terminal := flags.String("terminal-state", "terminated,failed,deleted", "the states that end a session, comma-separated")
	interval := flags.Duration("interval", 60*time.Second, "time between passes")
	once := flags.Bool("once", false, "one pass, then exit")
	dryRun := flags.Bool("dry-run", false, "restore: every create a server-side dry run")
	// `[flags] [restore SESSION [flags]]`: flags before and after the subcommand, nothing else.
	flags.Parse(os.Args[1:])
	restore := ""
	if rest := flags.Args(); len(rest) >= 2 && rest[0] == "restore" {
		restore = rest[1]
		flags.Parse(rest[2:])
	}
	logger := log.New(os.Stderr, "", log.LstdFlags)
	if flags.NArg() > 0 {
		logger.Fatalf("unexpected %q: streamspace [flags] [restore SESSION]", flags.Args())
	}
	if *gcURL == "" {
		logger.Fatal("-gc-url: gc's request API is needed")
	}
	options := []gc.Option{gc.WithTokenFile(*tokenFile)}
	if *caBundle != "" {
		options = append(options, gc.WithCABundle(*caBundle))
	}
	client, err := gc.New(*gcURL, options...)
	if err != nil {
		logger.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	r := &Reconciler{
		GC:             client,
		Namespace:      *namespace,
		TerminalStates: strings.Split(*terminal, ","),
		Log:            logger,
		Poll:           200 * time.Millisecond,
	}
	if r.DB, err = sql.Open("postgres", databaseURL()); err != nil {
		logger.Fatal(err)
	}
	defer r.DB.Close()
	if restore != "" {
		if _, err := r.Restore(ctx, restore, *dryRun); err != nil {
			logger.Fatal(err)
		}
		return
	}
	for {
		if err := r.Once(ctx); err != nil {
			logger.Print(err)
			if *once {
				os.Exit(1)
			}
		}
		if *once {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(*interval):
		}
	}
}

// databaseURL is DATABASE_URL, else the URL of StreamSpace's DB_* variables, spelled as
// StreamSpace's API code reads them (api/cmd/main.go: DB_SSL_MODE; its Helm chart also sets a
// DB_SSLMODE, which no code reads).
func databaseURL() string {
	if u := os.Getenv("DATABASE_URL"); u != "" {
		return u
	}
	env := func(name, otherwise string) string {
		if v := os.Getenv(name); v != "" {
			return v
		}
		return otherwise
	}
	u := url.URL{
		Scheme:   "postgres",
		User:     url.UserPassword(env("DB_USER", "streamspace"), os.Getenv("DB_PASSWORD")),
		Host:     env("DB_HOST", "localhost") + ":" + env("DB_PORT", "5432"),
		Path:     "/" + env("DB_NAME", "streamspace"),
		RawQuery: url.Values{"sslmode": {env("DB_SSL_MODE", "disable")}}.Encode(),
	}
	return u.String()
}
