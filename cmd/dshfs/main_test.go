package main

import (
	"os"
	"testing"

	"github.com/dshfs/dshfs/internal/pgtest"
)

// TestMain stops the private PostgreSQL server the fleet store's tests start, if one was.
func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
