// Package pgtest runs a private PostgreSQL server for tests: initdb into a temporary directory, a server
// listening on a unix socket there and on a loopback port, stopped when the tests end. The fleet store's
// tests run against a real server, never a mock of one; this package is how every test package gets one.
//
// The server runs as an unprivileged user: PostgreSQL refuses to run as root, and tests in CI run as root.
// Local (socket) connections are trusted; loopback TCP connections need a password (scram-sha-256), so
// that a wrong password can be tested.
package pgtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Superuser is the bootstrap role initdb creates; Password is its password over TCP.
const (
	Superuser = "dshfs"
	Password  = "pgtest-secret-7Q"
)

// BinDirEnv names a directory holding initdb and postgres, where the default search finds none.
const BinDirEnv = "DSHFS_PG_BINDIR"

// Server is one running private server.
type Server struct {
	dir     string // everything the server writes: data/, its socket, its log
	bin     string
	Port    int    // loopback TCP port
	Socket  string // directory of the unix socket
	cmd     *exec.Cmd
	exited  chan struct{}
	logPath string
	dbs     atomic.Int64
	cred    *syscall.Credential
	opts    Options
}

// binDir finds the server binaries: $DSHFS_PG_BINDIR, Debian's /usr/lib/postgresql/<major>/bin (the
// newest), or the PATH.
func binDir() (string, error) {
	if d := os.Getenv(BinDirEnv); d != "" {
		return d, nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return major(dirs[i]) > major(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", errors.New("pgtest: no PostgreSQL server binaries (initdb, postgres) found in /usr/lib/postgresql/*/bin, " +
		"the PATH or $" + BinDirEnv + ": install Debian's postgresql package (.ci/run does)")
}

func major(dir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return n
}

// credential is who the server runs as: the current user, or nobody when that is root.
func credential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("nobody")
	if err != nil {
		return nil, fmt.Errorf("pgtest: running as root and no unprivileged user to run the server as: %v", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// Options are a server's settings beyond the defaults.
type Options struct {
	// Durable keeps the server's own durability (fsync, synchronous commit, full-page writes), which tests
	// turn off: a benchmark measures what a real server costs.
	Durable bool
}

// Start initializes and starts a server for tests. Stop ends it and removes its directory.
func Start() (*Server, error) { return StartWith(Options{}) }

// StartWith is Start with options.
func StartWith(o Options) (*Server, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	cred, err := credential()
	if err != nil {
		return nil, err
	}
	// Not under a test's TempDir: its parents are 0700 and root's, which the server's user cannot enter.
	dir, err := os.MkdirTemp("", "dshfs-pg-")
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir, bin: bin, Socket: dir, logPath: filepath.Join(dir, "server.log"), cred: cred, opts: o}
	if err := s.init(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	var lastErr error
	for try := 0; try < 5; try++ {
		if lastErr = s.start(0); lastErr == nil {
			return s, nil
		}
	}
	os.RemoveAll(dir)
	return nil, lastErr
}

func (s *Server) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(s.bin, name), args...)
	cmd.Dir = s.dir
	cmd.Env = []string{"LC_ALL=C", "PATH=" + os.Getenv("PATH"), "HOME=" + s.dir}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred, Setpgid: true, Pdeathsig: syscall.SIGKILL}
	return cmd
}

func (s *Server) init() error {
	if s.cred != nil {
		if err := os.Chown(s.dir, int(s.cred.Uid), int(s.cred.Gid)); err != nil {
			return err
		}
	}
	if err := os.Chmod(s.dir, 0o755); err != nil {
		return err
	}
	pw := filepath.Join(s.dir, "pwfile")
	if err := os.WriteFile(pw, []byte(Password+"\n"), 0o644); err != nil {
		return err
	}
	cmd := s.command("initdb", "-D", filepath.Join(s.dir, "data"), "-U", Superuser, "--pwfile", pw,
		"--auth-local=trust", "--auth-host=scram-sha-256", "-E", "UTF8", "--locale=C", "--no-sync")
	out, err := cmd.CombinedOutput()
	os.Remove(pw)
	if err != nil {
		return fmt.Errorf("pgtest: initdb: %v\n%s", err, out)
	}
	return nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// start runs the server on port (0: a free one) and waits until it accepts connections.
func (s *Server) start(port int) error {
	if port == 0 {
		p, err := freePort()
		if err != nil {
			return err
		}
		port = p
	}
	s.Port = port
	logf, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o666)
	if err != nil {
		return err
	}
	args := []string{"-D", filepath.Join(s.dir, "data"), "-k", s.Socket, "-p", strconv.Itoa(port),
		"-c", "listen_addresses=127.0.0.1", "-c", "max_connections=300", "-c", "shared_buffers=128MB"}
	if !s.opts.Durable {
		// the tests prove dshfs's transactions, not the server's disk
		args = append(args, "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off")
	}
	cmd := s.command("postgres", args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	logf.Close()
	s.cmd, s.exited = cmd, make(chan struct{})
	go func() { cmd.Wait(); close(s.exited) }()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-s.exited:
			return fmt.Errorf("pgtest: server exited at start:\n%s", s.Log())
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		c, err := pgx.Connect(ctx, s.DSN("postgres"))
		cancel()
		if err == nil {
			c.Close(context.Background())
			return nil
		}
		time.Sleep(20 * time.Millisecond) // polling a server coming up: there is no event to wait on
	}
	s.kill()
	return fmt.Errorf("pgtest: server not ready within 60 s:\n%s", s.Log())
}

// Log is the server's log so far, for failure messages.
func (s *Server) Log() string {
	b, _ := os.ReadFile(s.logPath)
	return string(b)
}

// DSN is a URL for database db over the unix socket as the superuser (trusted: no password).
func (s *Server) DSN(db string) string {
	return fmt.Sprintf("postgres://%s@/%s?host=%s&port=%d", Superuser, db, s.Socket, s.Port)
}

// TCPDSN is a URL for database db over loopback TCP as user with password.
func (s *Server) TCPDSN(db, user, password string) string {
	return fmt.Sprintf("postgres://%s:%s@127.0.0.1:%d/%s?sslmode=disable", user, password, s.Port, db)
}

// Exec runs statements as the superuser in database db.
func (s *Server) Exec(db, sql string, args ...any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, s.DSN(db))
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	_, err = c.Exec(ctx, sql, args...)
	return err
}

// NewDatabase creates an empty database of its own for one test and returns its name.
func (s *Server) NewDatabase(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("t%d_%d", os.Getpid(), s.dbs.Add(1))
	if err := s.Exec("postgres", "CREATE DATABASE "+name); err != nil {
		t.Fatalf("pgtest: create database: %v", err)
	}
	return name
}

// CreateRole creates a login role with a password; readOnly roles get SELECT on everything in database
// db's public schema, now and later (the fleet store's tables are created by a writer after the role).
func (s *Server) CreateRole(t testing.TB, db, name, password string, readOnly bool) {
	t.Helper()
	stmts := []string{fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD '%s'", name, strings.ReplaceAll(password, "'", "''"))}
	if readOnly {
		stmts = append(stmts,
			fmt.Sprintf("GRANT CONNECT ON DATABASE %s TO %s", db, name))
	} else {
		stmts = append(stmts, fmt.Sprintf("GRANT ALL ON DATABASE %s TO %s", db, name))
	}
	for _, q := range stmts {
		if err := s.Exec("postgres", q); err != nil {
			t.Fatalf("pgtest: %s: %v", q, err)
		}
	}
	var inDB []string
	if readOnly {
		inDB = []string{
			fmt.Sprintf("GRANT USAGE ON SCHEMA public TO %s", name),
			fmt.Sprintf("GRANT SELECT ON ALL TABLES IN SCHEMA public TO %s", name),
			fmt.Sprintf("ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT ON TABLES TO %s", name),
		}
	} else {
		inDB = []string{fmt.Sprintf("GRANT ALL ON SCHEMA public TO %s", name)}
	}
	for _, q := range inDB {
		if err := s.Exec(db, q); err != nil {
			t.Fatalf("pgtest: %s: %v", q, err)
		}
	}
}

// Stop ends the server (a fast shutdown, then a kill) and removes its directory.
func (s *Server) Stop() {
	if s.cmd != nil && s.cmd.Process != nil {
		s.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-s.exited:
		case <-time.After(15 * time.Second):
			s.kill()
		}
	}
	os.RemoveAll(s.dir)
}

func (s *Server) kill() {
	if s.cmd != nil && s.cmd.Process != nil {
		syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.exited
	}
}

// Pause stops the server without removing it: an unreachable server, for tests of what clients say then.
// Connections held across it are dropped.
func (s *Server) Pause() {
	s.cmd.Process.Signal(syscall.SIGINT)
	<-s.exited
}

// Resume starts a paused server again on the same port.
func (s *Server) Resume() error {
	var err error
	for try := 0; try < 50; try++ {
		if err = s.start(s.Port); err == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond) // the kernel is releasing the port: nothing to wait on
	}
	return err
}

var (
	shared    *Server
	sharedErr error
	sharedMu  sync.Mutex
)

// Shared returns the test binary's one server, started at the first call; StopShared (from TestMain,
// after m.Run) ends it. A test package that needs a server fails — never skips — when none can start.
func Shared(t testing.TB) *Server {
	t.Helper()
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared == nil && sharedErr == nil {
		shared, sharedErr = Start()
	}
	if sharedErr != nil {
		t.Fatal(sharedErr)
	}
	return shared
}

// StopShared stops the shared server if one was started.
func StopShared() {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared != nil {
		shared.Stop()
		shared = nil
	}
}

// Main runs a test binary's tests and stops the shared server afterwards: `func TestMain(m *testing.M) {
// os.Exit(pgtest.Main(m)) }`.
func Main(m *testing.M) int {
	code := m.Run()
	StopShared()
	return code
}

// Freeze stops the postmaster and every backend with SIGSTOP: the server keeps its sockets open but answers
// nothing, as a server behind a network partition looks to its clients. Thaw undoes it. The backends are
// signalled one by one: each is a process group of its own.
func (s *Server) Freeze() {
	pm := s.cmd.Process.Pid
	syscall.Kill(pm, syscall.SIGSTOP) // first: a stopped postmaster starts no new backend
	for _, pid := range children(pm) {
		syscall.Kill(pid, syscall.SIGSTOP)
	}
}

// Thaw resumes a frozen server (SIGCONT).
func (s *Server) Thaw() {
	pm := s.cmd.Process.Pid
	for _, pid := range children(pm) {
		syscall.Kill(pid, syscall.SIGCONT)
	}
	syscall.Kill(pm, syscall.SIGCONT)
}

// children lists the processes whose parent is pid, from /proc.
func children(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid …: comm may hold spaces and parentheses, so read past the last ')'
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			out = append(out, n)
		}
	}
	return out
}
