package sqlite

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/dshfs/dshfs/eventstore"
	sqlite3 "github.com/mattn/go-sqlite3"
)

// Backups of a SQLite store (docs/tree.md, store/): a copy of the database file while writers run could
// mix pages of two transactions, so every copy is made with SQLite's online backup API, which copies the
// pages of one read transaction — one consistent instant. The mount's store/ shows that copy as
// sessions.db; `dshfs backup` writes it.

// MirrorName is the database's name in a backup and in the mount's store/.
const MirrorName = "sessions.db"

var _ eventstore.Freezer = (*Backend)(nil)

// snapshot is the latest consistent copy of the database, made for store/.
type snapshot struct {
	path   string
	frozen eventstore.Frozen
}

// Snapshot writes one consistent copy of the database to dst (a new file, mode 0600, fsynced).
func (b *Backend) Snapshot(ctx context.Context, dst string) error {
	f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	f.Close()
	fail := func(err error) error {
		os.Remove(dst)
		return err
	}
	ddb, err := sql.Open("sqlite3", dst)
	if err != nil {
		return fail(err)
	}
	defer ddb.Close()
	dconn, err := ddb.Conn(ctx)
	if err != nil {
		return fail(err)
	}
	defer dconn.Close()
	sdb, consistent, err := b.reader()
	if err != nil {
		return fail(err)
	}
	sconn, err := sdb.Conn(ctx)
	if err != nil {
		return fail(err)
	}
	defer sconn.Close()
	err = dconn.Raw(func(d any) error {
		return sconn.Raw(func(s any) error {
			dc, ok1 := d.(*sqlite3.SQLiteConn)
			sc, ok2 := s.(*sqlite3.SQLiteConn)
			if !ok1 || !ok2 {
				return errors.New("not a go-sqlite3 connection")
			}
			bk, err := dc.Backup("main", sc, "main")
			if err != nil {
				return err
			}
			// one step copies every page inside one read transaction of the source
			if _, err := bk.Step(-1); err != nil {
				bk.Finish()
				return err
			}
			return bk.Finish()
		})
	})
	if err == nil && !consistent() {
		err = errChangedWhileRead
	}
	if err != nil {
		return fail(fmt.Errorf("online backup of %s: %w", b.path, err))
	}
	// The copy carries the source's WAL flag; a WAL database opened read-only makes -shm and -wal files
	// beside it, which would change a backup by reading it. A rollback-journal copy reads with no side
	// file; whoever opens it to write selects their journal mode (the harness: WAL) as on any open.
	var mode string
	if err := dconn.QueryRowContext(ctx, "PRAGMA journal_mode = DELETE").Scan(&mode); err != nil || mode != "delete" {
		return fail(fmt.Errorf("the copy of %s keeps journal mode %q: %v", b.path, mode, err))
	}
	dconn.Close()
	ddb.Close()
	if err := syncFile(dst); err != nil {
		return fail(err)
	}
	return nil
}

func syncFile(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// storeToken names the state of every session at once: any commit to any session bumps its revision
// (or adds a row), so the token changes exactly when the database's content does.
func (b *Backend) storeToken(ctx context.Context) (string, time.Time, error) {
	if b.pristine {
		return "pristine", time.Time{}, nil
	}
	db, _, err := b.reader()
	if err != nil {
		return "", time.Time{}, err
	}
	rs, err := db.QueryContext(ctx, sqlSelectSessions)
	if err != nil {
		return "", time.Time{}, err
	}
	var sessions []session
	h := sha256.New()
	h.Write([]byte(b.identity))
	for rs.Next() {
		s, err := scanSession(rs)
		if err != nil {
			continue // a refused row still has a revision; its bytes are copied all the same
		}
		sessions = append(sessions, s)
		h.Write([]byte("\n" + s.header.ID + "\x00" + s.incarnation + "\x00" + strconv.FormatInt(s.revision, 10)))
	}
	rs.Close()
	if err := rs.Err(); err != nil {
		return "", time.Time{}, err
	}
	var newest time.Time
	b.lastTimes(ctx, sessions)
	for _, s := range sessions {
		if t := b.lastTime(ctx, db, s, b.token(s)); t.After(newest) {
			newest = t
		}
	}
	return hex.EncodeToString(h.Sum(nil)), newest, nil
}

// Freeze returns the current consistent copy of the database (path is the database), making a new one
// when the database changed since the last: its size, its identity (the copy's inode) and the newest
// session's time.
func (b *Backend) Freeze(ctx context.Context, path string, prev eventstore.Frozen) (eventstore.Frozen, error) {
	if path != b.path {
		return eventstore.Frozen{}, fmt.Errorf("%s is not this store's database (%s)", path, b.path)
	}
	b.snapMu.Lock()
	defer b.snapMu.Unlock()
	for range 3 {
		tok, newest, err := b.storeToken(ctx)
		if err != nil {
			return eventstore.Frozen{}, err
		}
		if b.snap != nil && b.snap.frozen.Token == tok {
			return b.snap.frozen, nil
		}
		if b.snapDir == "" {
			if b.snapDir, err = os.MkdirTemp("", "dshfs-sqlite-snapshots-"); err != nil {
				return eventstore.Frozen{}, err
			}
		}
		b.snapSeq++
		dst := filepath.Join(b.snapDir, strconv.Itoa(b.snapSeq)+".db")
		if err := b.Snapshot(ctx, dst); err != nil {
			return eventstore.Frozen{}, err
		}
		after, _, err := b.storeToken(ctx)
		if err != nil {
			os.Remove(dst)
			return eventstore.Frozen{}, err
		}
		if after != tok { // a commit landed during the copy: the copy may hold it, the token not
			os.Remove(dst)
			continue
		}
		fi, err := os.Stat(dst)
		if err != nil {
			return eventstore.Frozen{}, err
		}
		if b.snap != nil {
			os.Remove(b.snap.path) // readers holding it open keep their copy
		}
		b.snap = &snapshot{path: dst, frozen: eventstore.Frozen{Token: tok, Identity: fileIdentity(fi), Size: fi.Size(), ModTime: newest}}
		return b.snap.frozen, nil
	}
	return eventstore.Frozen{}, errors.New("the database kept changing during three consistent copies; try again")
}

func fileIdentity(fi os.FileInfo) string {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return strconv.FormatUint(st.Dev, 10) + ":" + strconv.FormatUint(st.Ino, 10)
	}
	return ""
}

// MirrorEntry is the database as the mount's store/ lists it: one file, named MirrorName.
func (b *Backend) MirrorEntry() (string, eventstore.Entry) {
	return MirrorName, eventstore.Entry{Path: b.path, Identity: b.identity, Owner: b.owner()}
}

// OpenArtifact opens a consistent copy of the database as it is now (made now when it changed).
func (b *Backend) OpenArtifact(ctx context.Context, path string) (*os.File, eventstore.Artifact, error) {
	if _, err := b.Freeze(ctx, path, eventstore.Frozen{}); err != nil {
		return nil, eventstore.Artifact{}, err
	}
	b.snapMu.Lock()
	snap := b.snap
	f, err := os.Open(snap.path)
	b.snapMu.Unlock()
	if err != nil {
		return nil, eventstore.Artifact{}, &eventstore.IOError{Err: err}
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, eventstore.Artifact{}, &eventstore.IOError{Err: err}
	}
	return f, eventstore.Artifact{Token: snap.frozen.Token, Identity: fileIdentity(fi), Size: fi.Size(), ModTime: snap.frozen.ModTime, Owner: b.owner()}, nil
}
