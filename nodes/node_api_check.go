package nodes

import "github.com/hanwen/go-fuse/v2/fs"

// The go-fuse interfaces each node and handle type answers, checked at compile time in one place: a
// method whose signature drifts from go-fuse's stops compiling here instead of silently not being called.

// Directories.
var (
	_ = (fs.NodeGetattrer)((*rootDir)(nil))
	_ = (fs.NodeLookuper)((*rootDir)(nil))
	_ = (fs.NodeReaddirer)((*rootDir)(nil))

	_ = (fs.NodeGetattrer)((*sessionsDir)(nil))
	_ = (fs.NodeLookuper)((*sessionsDir)(nil))
	_ = (fs.NodeReaddirer)((*sessionsDir)(nil))

	_ = (fs.NodeGetattrer)((*writableSessionsDir)(nil))
	_ = (fs.NodeLookuper)((*writableSessionsDir)(nil))
	_ = (fs.NodeReaddirer)((*writableSessionsDir)(nil))
	_ = (fs.NodeMkdirer)((*writableSessionsDir)(nil))

	_ = (fs.NodeGetattrer)((*groupsDir)(nil))
	_ = (fs.NodeLookuper)((*groupsDir)(nil))
	_ = (fs.NodeReaddirer)((*groupsDir)(nil))
	_ = (fs.NodeOpendirer)((*groupsDir)(nil))

	_ = (fs.NodeGetattrer)((*groupDir)(nil))
	_ = (fs.NodeLookuper)((*groupDir)(nil))
	_ = (fs.NodeReaddirer)((*groupDir)(nil))
	_ = (fs.NodeOpendirer)((*groupDir)(nil))

	_ = (fs.NodeGetattrer)((*sessionDir)(nil))
	_ = (fs.NodeLookuper)((*sessionDir)(nil))
	_ = (fs.NodeReaddirer)((*sessionDir)(nil))

	_ = (fs.NodeGetattrer)((*itemDir)(nil))
	_ = (fs.NodeLookuper)((*itemDir)(nil))
	_ = (fs.NodeReaddirer)((*itemDir)(nil))

	_ = (fs.NodeGetattrer)((*forksDir)(nil))
	_ = (fs.NodeLookuper)((*forksDir)(nil))
	_ = (fs.NodeReaddirer)((*forksDir)(nil))

	_ = (fs.NodeGetattrer)((*storeDir)(nil))
	_ = (fs.NodeLookuper)((*storeDir)(nil))
	_ = (fs.NodeReaddirer)((*storeDir)(nil))
)

// Files and links.
var (
	_ = (fs.NodeGetattrer)((*file)(nil))
	_ = (fs.NodeOpener)((*file)(nil))
	_ = (fs.NodeReader)((*file)(nil))
	_ = (fs.NodeOnForgetter)((*file)(nil))
	_ = (fs.NodeGetxattrer)((*file)(nil))
	_ = (fs.NodeListxattrer)((*file)(nil))

	_ = (fs.NodeGetattrer)((*spillFile)(nil))
	_ = (fs.NodeOpener)((*spillFile)(nil))

	_ = (fs.NodeGetattrer)((*mirrorFile)(nil))
	_ = (fs.NodeOpener)((*mirrorFile)(nil))
	_ = (fs.NodeReader)((*mirrorFile)(nil))

	_ = (fs.NodeReadlinker)((*link)(nil))
	_ = (fs.NodeGetattrer)((*link)(nil))
)

// The write side.
var (
	_ = (fs.NodeGetattrer)((*ctlFile)(nil))
	_ = (fs.NodeSetattrer)((*ctlFile)(nil))
	_ = (fs.NodeOpener)((*ctlFile)(nil))
	_ = (fs.NodeWriter)((*ctlFile)(nil))
	_ = (fs.NodeReader)((*ctlFile)(nil))

	_ = (fs.NodeGetattrer)((*appendFile)(nil))
	_ = (fs.NodeSetattrer)((*appendFile)(nil))
	_ = (fs.NodeOpener)((*appendFile)(nil))
	_ = (fs.NodeWriter)((*appendFile)(nil))
	_ = (fs.NodeReader)((*appendFile)(nil))
	_ = (fs.NodeFsyncer)((*appendFile)(nil))
	_ = (fs.NodeFlusher)((*appendFile)(nil))
)

// Handles.
var (
	_ = (fs.FileReader)((*spillHandle)(nil))
	_ = (fs.FileReleaser)((*spillHandle)(nil))
	_ = (fs.FileReleaser)((*mirrorHandle)(nil))
)
