package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/dshfs/dshfs/backup"
)

// prepareMountpoint checks a MOUNTPOINT before anything is mounted, so that a mistake is refused with the
// reason and never leaves a dead mount behind (docs/cli.md): it must not be the store, lie inside it or
// contain it (readers of either would loop through the mount), must be a directory, and must be empty
// unless nonempty. A mountpoint left dead by a killed dshfs ("transport endpoint is not connected") is
// cleared first. A missing one is created; created reports that, so the caller removes it afterwards.
func prepareMountpoint(store, mountpoint string, nonempty bool, logf func(string, ...any)) (abs string, created bool, err error) {
	abs, err = filepath.Abs(mountpoint)
	if err != nil {
		return "", false, err
	}
	if err := clearDeadMount(abs, logf); err != nil {
		return "", false, err
	}
	if store != "" {
		s, m := resolved(store), resolved(abs)
		switch {
		case s == m:
			return "", false, fmt.Errorf("mountpoint %s is the store itself: mount it somewhere else", abs)
		case within(m, s):
			return "", false, fmt.Errorf("mountpoint %s lies inside the store %s: mount it outside the store", abs, s)
		case within(s, m):
			return "", false, fmt.Errorf("the store %s lies inside the mountpoint %s: the mount would hide it; mount elsewhere", s, abs)
		}
	}
	fi, err := os.Stat(abs)
	switch {
	case os.IsNotExist(err):
		if err := os.MkdirAll(abs, 0o755); err != nil {
			return "", false, err
		}
		return abs, true, nil
	case err != nil:
		return "", false, err
	case !fi.IsDir():
		return "", false, fmt.Errorf("mountpoint %s is not a directory", abs)
	}
	if !nonempty {
		ents, err := os.ReadDir(abs)
		if err != nil {
			return "", false, err
		}
		if len(ents) > 0 {
			return "", false, fmt.Errorf("mountpoint %s is not empty (it holds %s): mounting would hide its files; give an empty directory, or --nonempty to mount over it anyway (did you mean it as STORE?)", abs, ents[0].Name())
		}
	}
	return abs, false, nil
}

// resolved is a path with its symlinks resolved as far as they exist.
func resolved(p string) string {
	abs, err := filepath.Abs(p)
	if err != nil {
		return p
	}
	if r, err := filepath.EvalSymlinks(abs); err == nil {
		return r
	}
	return abs
}

// within reports whether p lies strictly inside dir.
func within(p, dir string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != "." && rel != ".." && !strings.HasPrefix(rel, "../")
}

// clearDeadMount refuses a live dshfs mount by what it is (liveMount), and detects a mount whose server died (statfs fails with ENOTCONN: unlike stat, which the
// kernel may answer from its attribute cache, statfs always asks the server) and, when /proc/mounts says
// it was a dshfs mount, unmounts it lazily; anything else is left alone with instructions.
//
// Only a FUSE mount can be dead so, and /proc/mounts (which asks no server) says whether mountpoint is
// one: a plain directory is never statfs'd through a server. A FUSE mountpoint is probed in a child
// process under backup.ProbeTimeout: its server may be stopped rather than dead, and then statfs would
// block the caller uninterruptibly.
func clearDeadMount(mountpoint string, logf func(string, ...any)) error {
	mounts, err := backup.Mounts()
	if err != nil {
		return err
	}
	// /proc/mounts names the canonical path; only the parent is resolved, since resolving the mountpoint
	// itself would ask its server
	canonical := filepath.Join(resolved(filepath.Dir(mountpoint)), filepath.Base(mountpoint))
	var entry backup.MountEntry
	for _, m := range mounts {
		if (m.Point == mountpoint || m.Point == canonical) && strings.HasPrefix(m.Type, "fuse") {
			entry = m // the last one is the mount on top
		}
	}
	if entry.Point == "" {
		return nil
	}
	dshfs := entry.Type == "fuse.dshfs"
	how := "fusermount3 -u -z " + mountpoint
	if os.Geteuid() == 0 {
		how = "umount -l " + mountpoint
	}
	err = backup.Statfs(mountpoint)
	switch {
	case errors.Is(err, backup.ErrUnresponsive):
		return fmt.Errorf("mountpoint %s is a FUSE mount (%s) whose server %v: it is stopped or wedged; resume or end its process, or clear it with: %s%s", mountpoint, entry.Type, err, how, abortHint(mountpoint, canonical))
	case !errors.Is(err, syscall.ENOTCONN):
		if dshfs {
			return liveMount(mountpoint)
		}
		return nil // a live mount: prepareMountpoint refuses it as not empty, or --nonempty mounts over it
	}
	if !dshfs {
		return fmt.Errorf("mountpoint %s is a dead FUSE mount of another program (transport endpoint is not connected); clear it with: %s", mountpoint, how)
	}
	logf("mountpoint %s is a dead dshfs mount (its dshfs was killed): clearing it", mountpoint)
	if os.Geteuid() == 0 {
		err = syscall.Unmount(mountpoint, syscall.MNT_DETACH)
	} else {
		var out []byte
		out, err = exec.Command("fusermount3", "-u", "-z", mountpoint).CombinedOutput()
		if err != nil {
			err = fmt.Errorf("%v: %s", err, strings.TrimSpace(string(out)))
		}
	}
	if err != nil {
		return fmt.Errorf("mountpoint %s is a dead dshfs mount and clearing it failed (%v); clear it with: %s", mountpoint, err, how)
	}
	return nil
}

// abortHint says how to abort a hung FUSE connection through the fusectl filesystem: a server process that
// cannot be ended (stuck in the kernel on its own mount) keeps the connection, and with it every process
// that touches the mountpoint, until the connection is aborted. The connection's directory is named by
// the mount's device number, which /proc/self/mountinfo gives without asking the server.
func abortHint(points ...string) string {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return ""
	}
	return abortHintFrom(b, points...)
}

// abortHintFrom is abortHint with the mount table given (/proc/self/mountinfo's text).
func abortHintFrom(b []byte, points ...string) string {
	dev, fusectl := "", false
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		if sep := slices.Index(f, "-"); sep > 0 && sep+1 < len(f) && f[sep+1] == "fusectl" {
			fusectl = true
		}
		if slices.Contains(points, backup.UnescapeMount(f[4])) {
			dev = f[2] // the last one is the mount on top
		}
	}
	major, minor, ok := strings.Cut(dev, ":")
	if !ok {
		return ""
	}
	maj, err1 := strconv.ParseUint(major, 10, 32)
	min, err2 := strconv.ParseUint(minor, 10, 32)
	if err1 != nil || err2 != nil {
		return ""
	}
	conn := "/sys/fs/fuse/connections/" + strconv.FormatUint(maj<<20|min, 10)
	mount := ""
	if !fusectl {
		mount = "mount -t fusectl none /sys/fs/fuse/connections; "
	}
	return fmt.Sprintf("; if its process cannot be ended (state D), abort the connection as root: %secho 1 > %s/abort", mount, conn)
}

// liveMount refuses a mountpoint where a dshfs mount is live, naming its store and process (its status.json
// and stats.json, each read under the probe's deadline): mounting over it would only hide it.
func liveMount(mountpoint string) error {
	what := "a dshfs mount"
	if root, err := backup.MountRoot(mountpoint); err == nil {
		what += " of " + root
	}
	stop := "fusermount3 -u " + mountpoint
	if os.Geteuid() == 0 {
		stop = "umount " + mountpoint
	}
	if pid, err := backup.MountPid(mountpoint); err == nil {
		what += fmt.Sprintf(" (pid %d)", pid)
		stop = fmt.Sprintf("kill -TERM %d (it flushes, then unmounts)", pid)
	}
	return fmt.Errorf("mountpoint %s is already %s: unmount it first with %s, or mount elsewhere", mountpoint, what, stop)
}
