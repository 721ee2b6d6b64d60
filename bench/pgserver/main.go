// Command pgserver runs a private PostgreSQL server for bench/pg.sh (internal/pgtest: initdb into a
// temporary directory as an unprivileged user, a unix socket there, with the server's durability on), prints the admin DSN (database
// "postgres") on its first line, and stops and removes the server when its standard input closes or it is
// signalled.
package main

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/dshfs/dshfs/internal/pgtest"
)

func main() {
	s, err := pgtest.StartWith(pgtest.Options{Durable: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, "pgserver:", err)
		os.Exit(1)
	}
	fmt.Println(s.DSN("postgres"))
	done := make(chan struct{})
	go func() { io.Copy(io.Discard, os.Stdin); close(done) }()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	select {
	case <-done:
	case <-sig:
	}
	s.Stop()
}
